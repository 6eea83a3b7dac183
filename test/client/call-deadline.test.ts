import { getEventListeners } from "node:events";
import { describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { createNodeClient } from "../../src/client/node.js";
import { freePort } from "./child-host.js";
import { peerFixture } from "./peer-fixture.js";

const { peer, track, silentUpgrades } = peerFixture();
/** Answers `session.models` and nothing else. */
function silentPeer() {
  return peer({ onCall: (_conn, f) => (f.method === "session.models" ? { models: [] } : undefined) });
}

describe("every call settles: timeout and AbortSignal", () => {
  it("a call the host never answers rejects with timeout, and its late answer is dropped", async () => {
    const p = await silentPeer();
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    // Open first, so the call is on the wire before its timeout fires, however slow the machine.
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const error = await client.page({ sessionId: "s" }, { timeoutMs: 100 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SessionmuxError);
    expect(error).toMatchObject({
      code: "timeout",
      message: "session.page: no answer within 100 ms (the socket is open; the host did not answer)",
      retryable: true,
      data: { method: "session.page", timeoutMs: 100 },
    });
    await vi.waitFor(() => expect(p.received("call")).toHaveLength(1));
    const late = p.received("call")[0] as { id: number };
    p.connections[0]!.send({ type: "result", id: late.id, value: { late: true } });
    // The socket stays usable: the next call on it is answered.
    await expect(client.call("session.models", {})).resolves.toEqual({ models: [] });
  });

  it("the client's callTimeoutMs is the default for every call", async () => {
    const p = await silentPeer();
    const client = track(createNodeClient({ url: p.url, token: "t", callTimeoutMs: 80 }));
    await expect(client.list()).rejects.toMatchObject({ code: "timeout" });
  });

  it("an AbortSignal settles a call in flight with aborted, carrying the caller's reason", async () => {
    const p = await silentPeer();
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    const controller = new AbortController();
    const pending = client.list({}, { signal: controller.signal }).catch((e: unknown) => e);
    await vi.waitFor(() => expect(p.received("call")).toHaveLength(1));
    controller.abort("user left");
    const error = await pending;
    expect(error).toMatchObject({
      code: "aborted",
      message: "session.list was aborted by the caller",
      retryable: false,
    });
    expect((error as Error).cause).toBe("user left");
  });

  it("an already aborted signal rejects without sending anything", async () => {
    const p = await silentPeer();
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    await client.call("session.models", {});
    await expect(client.list({}, { signal: AbortSignal.abort() })).rejects.toMatchObject({ code: "aborted" });
    await client.call("session.models", {});
    expect(p.received("call").map((f) => f.method)).toEqual(["session.models", "session.models"]);
  });

  it("a signal shared by many calls keeps no listener of theirs once they settle", async () => {
    const p = await silentPeer();
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    const { signal } = new AbortController();
    // More calls than Node's listener warning threshold, answered and timed out alike.
    for (let i = 0; i < 12; i++) {
      await client.call("session.models", {}, { signal });
      expect(getEventListeners(signal, "abort")).toHaveLength(0);
    }
    await expect(client.list({}, { signal, timeoutMs: 20 })).rejects.toMatchObject({ code: "timeout" });
    expect(getEventListeners(signal, "abort")).toHaveLength(0);
  });

  it("a call against a host that is down settles with timeout naming the reconnect state", async () => {
    const port = await freePort();
    const client = track(
      createNodeClient({
        url: `ws://127.0.0.1:${port}/api/remote.mux`,
        token: "t",
        backoff: { baseMs: 5, capMs: 20 },
      }),
    );
    const error = await client.list({}, { timeoutMs: 150 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "timeout" });
    expect(["backoff", "connecting"]).toContain(client.state.name);
  });
});

describe("a call's timeout says what the connection was doing", () => {
  it("backing off from a host that refuses: which reconnect attempt is pending", async () => {
    const p = await peer({ refuse: () => 503 });
    const client = track(
      createNodeClient({ url: p.url, token: "t", backoff: { baseMs: 60_000, capMs: 60_000 } }),
    );
    await vi.waitFor(() => expect(client.state.name).toBe("backoff"));
    const error = await client.list({}, { timeoutMs: 50 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "timeout" });
    expect((error as Error).message).toBe(
      "session.list: no answer within 50 ms (the host is unreachable; reconnect attempt 1 pending)",
    );
  });

  it("a host that takes the connection but never answers the upgrade: still connecting", async () => {
    const { port, accepted } = await silentUpgrades();
    const client = track(createNodeClient({ url: `ws://127.0.0.1:${port}/api/remote.mux`, token: "t" }));
    await vi.waitFor(() => expect(accepted).toHaveLength(1));
    const error = await client.list({}, { timeoutMs: 50 }).catch((e: unknown) => e);
    expect(client.state.name).toBe("connecting");
    expect((error as Error).message).toBe(
      "session.list: no answer within 50 ms (still connecting to the host)",
    );
  });
});
