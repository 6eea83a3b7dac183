import { createServer } from "node:net";
import { describe, expect, it, vi } from "vitest";
import { createSessionmux } from "../../src/index.js";
import { startHost } from "../../src/server.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { tempDir } from "../support/temp-dir.js";
import { ShoutAgent } from "./shout-agent.js";

const cleanups = cleanupsAfterEach();
const tokens = [{ name: "admin", secret: "t", admin: true }];

/** An app's agent whose own close fails (its model client already gone). */
class FailingCloseAgent extends ShoutAgent {
  async close(): Promise<void> {
    throw new Error("model client already gone");
  }
}

function folder() {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  return dir;
}

/** Whether nothing listens on `port` any more: a plain server can take it. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

describe("closing a host whose agent fails to close", () => {
  it("still closes the database, so the app can open it again, and reports the agent's failure", async () => {
    const dir = folder();
    const { logger, lines } = capturedLogger();
    const mux = await createSessionmux({
      db: dir.file("sessions.db"),
      tokens,
      agent: new FailingCloseAgent(),
      logger,
    });
    // the agent's own error, not a stand-in for it
    const failure = await mux.close().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toBe("model client already gone");
    const logged = lines.filter((l) => l.msg === "shutdown step failed");
    expect(logged).toEqual([expect.objectContaining({ part: "host", err: expect.anything() })]);
    expect(lines.some((l) => l.msg === "shutdown complete")).toBe(false);
    const again = await createSessionmux({ db: dir.file("sessions.db"), tokens });
    cleanups.push(() => again.close());
    expect(again.store).toBeDefined();
  });

  it("still releases the port of a host on a server of its own", async () => {
    const dir = folder();
    const running = await startHost({
      dbPath: dir.file("sessions.db"),
      port: 0,
      tokens,
      agent: new FailingCloseAgent(),
    });
    await expect(running.close()).rejects.toThrow("model client already gone");
    expect(running.server.listening).toBe(false);
    expect(await portFree(running.port)).toBe(true);
  });

  it("names each part whose close failed in the log and throws the first failure", async () => {
    const dir = folder();
    const { logger, lines } = capturedLogger();
    const mux = await createSessionmux({ db: dir.file("sessions.db"), tokens, logger });
    const client = mux.connect({ name: "admin", admin: true });
    await client.create({ sessionId: "s" });
    // an in-process client whose close fails, and a database whose close fails (a full disk)
    const closeClient = client.close.bind(client);
    vi.spyOn(client, "close").mockRejectedValueOnce(new Error("client stuck"));
    const closeStore = mux.store.close.bind(mux.store);
    vi.spyOn(mux.store, "close").mockRejectedValueOnce(new Error("disk full"));
    await expect(mux.close()).rejects.toThrow("client stuck");
    expect(lines.filter((l) => l.msg === "shutdown step failed").map((l) => l.part)).toEqual([
      "in-process clients",
      "database",
    ]);
    await closeClient();
    await closeStore();
  });
});
