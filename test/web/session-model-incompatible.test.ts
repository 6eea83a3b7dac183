import "fake-indexeddb/auto";
import { createStore } from "idb-keyval";
import { describe, expect, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { ConsoleLink } from "../../web/src/console-link.js";
import { RETRY_FIRST_MS } from "../../web/src/retry-wait.js";
import { SessionCache } from "../../web/src/session-cache.js";
import { SessionModel } from "../../web/src/session-model.js";
import { startFakePeer } from "../client/fake-peer.js";
import { cleanupsAfterEach } from "../support/cleanups.js";

const cleanups = cleanupsAfterEach();

/** A console link counting the reads and follow streams the model asks the host for. */
class CountingLink extends ConsoleLink {
  asked = 0;
  override follow(...args: Parameters<ConsoleLink["follow"]>): () => void {
    this.asked += 1;
    return super.follow(...args);
  }
  override page(...args: Parameters<ConsoleLink["page"]>): ReturnType<ConsoleLink["page"]> {
    this.asked += 1;
    return super.page(...args);
  }
}

describe("console session model on a host of another protocol version", () => {
  it("stops, saying unsupported_protocol, and asks the host nothing again: it would fail until a reload", async () => {
    const peer = await startFakePeer({ protocol: () => 2 });
    cleanups.push(() => peer.stop());
    const client = createNodeClient({ url: peer.url, token: "t" });
    cleanups.push(() => client.close());
    const link = new CountingLink(() => client, "t");
    const cache = new SessionCache("partition", {
      data: createStore("incompatible-model", "entries"),
      usage: createStore("incompatible-model-usage", "usage"),
    });
    const model: SessionModel = new SessionModel("s1", link, cache, () => undefined);
    cleanups.push(() => model.dispose());
    model.start();
    await expect.poll(() => model.error, { timeout: 10_000 }).toBe("unsupported_protocol");
    expect(model.mode).toBe("stopped");
    const asked = link.asked;
    expect(asked).toBeGreaterThan(0);
    // past the first wait before a failed read or follow is made again
    await new Promise((resolve) => setTimeout(resolve, RETRY_FIRST_MS + 500));
    expect(link.asked).toBe(asked);
    expect(model.mode).toBe("stopped");
  });
});
