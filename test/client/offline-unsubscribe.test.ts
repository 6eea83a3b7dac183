import { describe, expect, it, vi } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { startFakePeer } from "./fake-peer.js";

const cleanups = cleanupsAfterEach();

describe("a stream given up while the client is offline", () => {
  it("stops waiting for a socket at once, and is never opened on the next one", async () => {
    // refuses the first upgrade, then accepts: the client waits out a long backoff, offline
    const peer = await startFakePeer({ refuse: (attempt) => (attempt === 1 ? 503 : undefined) });
    cleanups.push(() => peer.stop());
    const client = createNodeClient({
      url: peer.url,
      token: "t",
      backoff: { baseMs: 60_000, capMs: 60_000 },
    });
    cleanups.push(() => client.close());
    await vi.waitFor(() => expect(client.state.name).toBe("backoff"), { timeout: 15_000 });
    expect(client.waitingForSocket).toBe(0);

    const raw = client.open("session.control", {}).subscribe();
    const follow = client.follow("s1").subscribe();
    const control = client.control().subscribe();
    expect(client.waitingForSocket).toBe(3);
    raw.unsubscribe();
    follow.unsubscribe();
    control.unsubscribe();
    // before, each stayed a listener on the connection state until the next socket opened
    expect(client.waitingForSocket).toBe(0);

    // a call given up by its signal stops waiting too
    const abort = new AbortController();
    const call = client.list({}, { signal: abort.signal }).catch((error: unknown) => error);
    expect(client.waitingForSocket).toBe(1);
    abort.abort();
    await expect(call).resolves.toMatchObject({ code: "aborted" });
    expect(client.waitingForSocket).toBe(0);

    client.reconnectNow();
    await vi.waitFor(() => expect(client.state.name).toBe("open"), { timeout: 15_000 });
    // a stream opened now is the only one the host hears of: those given up would come before it
    const kept = client.open("session.follow", { sessionId: "kept" }).subscribe();
    cleanups.push(() => kept.unsubscribe());
    const received = () => peer.connections[0]?.received ?? [];
    const isKept = (frame: Record<string, unknown>) =>
      (frame.params as { sessionId?: string })?.sessionId === "kept";
    await vi.waitFor(() => expect(received().some(isKept)).toBe(true), { timeout: 15_000 });
    expect(received()).toMatchObject([
      { type: "open", method: "session.follow", params: { sessionId: "kept" } },
    ]);
    expect(received()).toHaveLength(1);
    expect(client.waitingForSocket).toBe(0);
  });
});
