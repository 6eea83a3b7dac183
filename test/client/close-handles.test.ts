import { describe, expect, it, vi } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { startFakePeer } from "./fake-peer.js";

/**
 * Polls without `vi.waitFor`, whose own timers would show up as active resources: each check runs
 * after its timer fired, when no timer of ours is pending. Gives up after 5 s.
 */
/** True when `after` holds no resource type more often than `before` did. */
function noneAdded(before: string[], after: string[]): boolean {
  const count = (list: string[], type: string) => list.filter((r) => r === type).length;
  return after.every((type) => count(after, type) <= count(before, type));
}

async function settledResources(expected: string[]): Promise<string[]> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const now = resources();
    if (noneAdded(expected, now) || Date.now() > deadline) return now;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const resources = () =>
  process
    .getActiveResourcesInfo()
    .filter((r) => r !== "TTYWrap")
    .sort();

const cleanups = cleanupsAfterEach();

describe("client.close() handles", () => {
  it("leaves no timer or socket behind, whether open or backing off", async () => {
    const p = await startFakePeer();
    const refusing = await startFakePeer({ refuse: () => 503 });
    cleanups.push(
      () => p.stop(),
      () => refusing.stop(),
    );
    const before = resources();
    const open = createNodeClient({ url: p.url, token: "t" });
    const waiting = createNodeClient({
      url: refusing.url,
      token: "t",
      backoff: { baseMs: 30_000, capMs: 30_000 },
    });
    const stream = open.open("session.control", {}).subscribe({ error: () => {} });
    await vi.waitFor(() => expect(open.state.name).toBe("open"));
    await vi.waitFor(() => expect(waiting.state.name).toBe("backoff"));
    expect(resources().length).toBeGreaterThan(before.length);
    await Promise.all([open.close(), waiting.close()]);
    stream.unsubscribe();
    const after = await settledResources(before);
    expect(noneAdded(before, after), `before ${before.join(",")} after ${after.join(",")}`).toBe(true);
  });
});
