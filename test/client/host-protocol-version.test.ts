import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { SessionmuxError } from "../../protocol/errors.js";
import { SUBPROTOCOL } from "../../protocol/index.js";
import type { ConnectionState } from "../../src/client/connection-state.js";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { followSession } from "../../src/client/follow-session.js";
import { createClient, isTerminal, type SessionmuxClient } from "../../src/client/index.js";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";

const cleanups = cleanupsAfterEach();

/**
 * A `ws` server on 127.0.0.1 whose `hello` names the protocol version `version` gives for each
 * connection (1-based); one of version 1 answers `session.list`. Records how each socket closed.
 * Refuses the upgrades `refuse` picks (1-based) with HTTP 401.
 */
async function versionedHost(version: (connection: number) => number, refuse = (_upgrade: number) => false) {
  let upgrades = 0;
  const wss = new WebSocketServer({
    host: "127.0.0.1",
    port: 0,
    perMessageDeflate: false,
    handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
    verifyClient: (_info, done) => {
      upgrades += 1;
      if (refuse(upgrades)) done(false, 401);
      else done(true);
    },
  });
  await once(wss, "listening");
  const closes: number[] = [];
  let connections = 0;
  wss.on("connection", (socket) => {
    connections += 1;
    const protocol = version(connections);
    socket.on("close", (code) => closes.push(code));
    // a newer host may change the rest of its hello too
    socket.send(encodeFrame({ type: "hello", protocol, hostId: "h", generation: "g", serverTime: 1 }));
    socket.on("message", (data) => {
      const frame = decodeFrame(new Uint8Array(data as Buffer)) as { type: string; id: number };
      if (frame.type === "call" && protocol === 1) {
        socket.send(encodeFrame({ type: "result", id: frame.id, value: { sessions: [] } }));
      }
    });
  });
  cleanups.push(async () => {
    for (const s of wss.clients) s.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  });
  const { port } = wss.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/api/remote.mux`,
    closes,
    get connections() {
      return connections;
    },
  };
}

function track(client: SessionmuxClient): ConnectionState[] {
  cleanups.push(() => client.close());
  const seen: ConnectionState[] = [];
  const sub = client.state$.subscribe((s) => seen.push(s));
  cleanups.push(() => sub.unsubscribe());
  return seen;
}

const untilState = (client: SessionmuxClient, name: ConnectionState["name"]) =>
  new Promise<void>((resolve) => {
    const sub = client.state$.subscribe((s) => {
      if (s.name !== name) return;
      queueMicrotask(() => sub.unsubscribe());
      resolve();
    });
  });

describe("a host whose hello names another protocol version", () => {
  it.each([
    ["Node", (url: string, options: object) => createNodeClient({ url, token: "t", ...options })],
    [
      "browser-style",
      (url: string, options: object) => createClient({ url, token: "t", WebSocket, ...options }),
    ],
  ])(
    "is the terminal incompatible state for a %s client: calls and streams fail unsupported_protocol, no reconnect",
    async (_kind, make) => {
      const host = await versionedHost(() => 2);
      // each error told, with the state the client was in when it was told
      const reported: string[] = [];
      // quick to give up on a hello and to back off: a client that retried would do so at once
      const client: SessionmuxClient = make(host.url, {
        helloTimeoutMs: 20,
        backoff: { baseMs: 0, capMs: 0 },
        onError: (error: SessionmuxError) => reported.push(`${error.code} in ${client.state.name}`),
      });
      const toldOnErrors$: string[] = [];
      const errors = client.errors$.subscribe((error) =>
        toldOnErrors$.push(`${error.code} in ${client.state.name}`),
      );
      cleanups.push(() => errors.unsubscribe());
      const seen = track(client);
      // waiting for a socket from before the hello; a client that kept retrying would time it out
      const call = client.list({}, { timeoutMs: 5_000 }).catch((e: unknown) => e);
      const follow = (async () => {
        for await (const _ of client.follow("s")) return "an update";
      })().catch((e: unknown) => e);
      const control = (async () => {
        for await (const _ of client.control()) return "a mirror";
      })().catch((e: unknown) => e);

      // one by one: on a client that retries for ever the call times out and the streams never end
      for (const pending of [call, follow, control]) {
        const outcome = await pending;
        expect(outcome).toBeInstanceOf(SessionmuxError);
        expect(outcome).toMatchObject({
          code: "unsupported_protocol",
          retryable: false,
          data: { protocol: 2 },
        });
      }
      expect(client.state).toEqual({ name: "incompatible", protocol: 2 });
      expect(isTerminal(client.state)).toBe(true);
      // a call made later fails the same way at once
      await expect(client.list({}, { timeoutMs: 60_000 })).rejects.toMatchObject({
        code: "unsupported_protocol",
      });
      // the client closes the socket itself, cleanly, and opens no other
      while (host.closes.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(host.closes).toEqual([1000]);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(host.connections).toBe(1);
      expect(seen.map((s) => s.name)).toEqual(["connecting", "incompatible"]);
      expect(reported).toEqual(["unsupported_protocol in incompatible"]);
      expect(toldOnErrors$).toEqual(["unsupported_protocol in incompatible"]);
    },
  );

  it("reconnectNow leaves it: a host back on protocol 1 opens and answers", async () => {
    const host = await versionedHost((n) => (n === 1 ? 2 : 1));
    const client = createNodeClient({ url: host.url, token: "t", onError: () => {} });
    const seen = track(client);
    await untilState(client, "incompatible");
    client.reconnectNow();
    // leaves at once: a call made right after waits for the new socket
    expect(client.state.name).toBe("connecting");
    await expect(client.list({}, { timeoutMs: 60_000 })).resolves.toEqual({ sessions: [] });
    expect(seen.map((s) => s.name)).toEqual(["connecting", "incompatible", "connecting", "open"]);
    expect(host.connections).toBe(2);
  });

  it("a follow waiting for a new token after a refusal fails unsupported_protocol when the host then speaks another version", async () => {
    const host = await versionedHost(
      () => 2,
      (n) => n === 1,
    );
    const client = createNodeClient({ url: host.url, token: "old", onError: () => {} });
    track(client);
    const updates: FollowUpdate[] = [];
    const failure = new Promise<unknown>((resolve) => {
      const sub = followSession(client, "s").subscribe({
        next: (u) => updates.push(u),
        error: resolve,
        complete: () => resolve("completed"),
      });
      cleanups.push(() => sub.unsubscribe());
    });
    await untilState(client, "unauthorized");
    client.setToken("new");
    const error = await failure;
    expect(error).toBeInstanceOf(SessionmuxError);
    expect(error).toMatchObject({ code: "unsupported_protocol", data: { protocol: 2 } });
    expect(client.state).toEqual({ name: "incompatible", protocol: 2 });
    expect(host.connections).toBe(1);
  });

  it("a hello without a version stays a frame the client cannot read", async () => {
    const host = await versionedHost(() => Number.NaN);
    const reported: SessionmuxError[] = [];
    const client = createNodeClient({
      url: host.url,
      token: "t",
      helloTimeoutMs: 20,
      backoff: { baseMs: 0, capMs: 0 },
      onError: (error) => reported.push(error),
    });
    track(client);
    // not a version: the socket is dropped after the hello wait and the client tries again
    while (host.connections < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(reported.map((e) => e.code).slice(0, 2)).toEqual(["invalid_host_frame", "timeout"]);
    expect(isTerminal(client.state)).toBe(false);
  });
});
