import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { describe, expect, it, vi } from "vitest";
import { WebSocketServer } from "ws";
import { SUBPROTOCOL } from "../../protocol/index.js";
import { createNodeSocketFactory } from "../../src/client/node.js";
import type { WebSocketLike } from "../../src/client/socket.js";
import { freePort } from "./child-host.js";
import type { PeerConnection } from "./fake-peer.js";
import { peerFixture } from "./peer-fixture.js";

/**
 * The Node socket factory on its own, without a client on top: real `ws` sockets to peers on
 * 127.0.0.1. What a client relies on (failure codes, heartbeats, the silence watchdog, the
 * handshake deadline) is checked on the socket the factory hands out.
 */

const { cleanups, peer, silentUpgrades } = peerFixture();

/** Watches a factory socket as the client would: its events, and whether it is gone. */
function watch(like: WebSocketLike) {
  const seen = { opened: false, closed: false, messages: 0 };
  like.onopen = () => {
    seen.opened = true;
  };
  like.onmessage = () => {
    seen.messages += 1;
  };
  like.onerror = () => {};
  like.onclose = () => {
    seen.closed = true;
  };
  cleanups.push(async () => {
    if (seen.closed) return;
    like.terminate?.();
    // gone before the next test, so no timer of this socket outlives its test
    await vi.waitFor(() => expect(seen.closed).toBe(true));
  });
  return seen;
}

describe("Node socket factory", () => {
  it("offers sessionmux.v1 without asking for permessage-deflate", async () => {
    const p = await peer();
    const seen = watch(createNodeSocketFactory()(p.url, "t"));
    await vi.waitFor(() => expect(seen.opened).toBe(true));
    const req = p.connections[0]!.request;
    expect(req.headers["sec-websocket-protocol"]).toBe(SUBPROTOCOL);
    expect(req.headers["sec-websocket-extensions"]).toBeUndefined();
  });

  it("upgrades over the connection createConnection gives, not one to the URL's port", async () => {
    const p = await peer();
    const nothingThere = await freePort();
    const factory = createNodeSocketFactory({ createConnection: () => connect(p.port, "127.0.0.1") });
    const seen = watch(factory(`ws://127.0.0.1:${nothingThere}/api/remote.mux`, "t"));
    await vi.waitFor(() => expect(seen.opened).toBe(true));
    expect(p.connections).toHaveLength(1);
  });

  it("a connect to a port nothing listens on records ECONNREFUSED as the socket's failure code", async () => {
    const port = await freePort();
    const like = createNodeSocketFactory()(`ws://127.0.0.1:${port}/api/remote.mux`, "t");
    const seen = watch(like);
    await vi.waitFor(() => expect(seen.closed).toBe(true));
    expect(like.failureCode).toBe("ECONNREFUSED");
  });

  it("gives up an upgrade the host never answers after handshakeTimeoutMs", async () => {
    // accepts TCP, then says nothing: the upgrade request goes unanswered
    const { port, accepted } = await silentUpgrades();
    const factory = createNodeSocketFactory({ handshakeTimeoutMs: 100 });
    const seen = watch(factory(`ws://127.0.0.1:${port}/api/remote.mux`, "t"));
    // well short of the 10 s default, which would leave the socket hanging here
    await vi.waitFor(() => expect(seen.closed).toBe(true), { timeout: 5_000 });
    expect(seen.opened).toBe(false);
    expect(accepted).toHaveLength(1);
  });

  it("keepAlivePing on a socket still connecting sends nothing and does not throw; once open it pings", async () => {
    const p = await peer();
    const like = createNodeSocketFactory()(p.url, "t");
    const seen = watch(like);
    expect(like.readyState).toBe(0);
    expect(() => like.keepAlivePing?.()).not.toThrow();
    await vi.waitFor(() => expect(seen.opened).toBe(true));
    let pings = 0;
    p.connections[0]!.socket.on("ping", () => (pings += 1));
    like.keepAlivePing?.();
    await vi.waitFor(() => expect(pings).toBe(1));
  });

  it("tells onheartbeat of the host's pings and of the pongs to its own pings", async () => {
    const p = await peer();
    const like = createNodeSocketFactory()(p.url, "t");
    const seen = watch(like);
    let beats = 0;
    like.onheartbeat = () => (beats += 1);
    await vi.waitFor(() => expect(seen.opened).toBe(true));
    p.connections[0]!.socket.ping();
    await vi.waitFor(() => expect(beats).toBe(1));
    // the host's ws answers the ping with a pong
    like.keepAlivePing?.();
    await vi.waitFor(() => expect(beats).toBe(2));
  });

  it("used without a client (no onheartbeat), hears pings and pongs and the frames after them", async () => {
    const p = await peer();
    const like = createNodeSocketFactory()(p.url, "t");
    const seen = watch(like);
    await vi.waitFor(() => expect(seen.messages).toBe(1));
    p.connections[0]!.socket.ping();
    like.keepAlivePing?.();
    // a ping answered proves the pong came back before this frame
    await new Promise<void>((resolve) => p.connections[0]!.socket.once("ping", () => resolve()));
    p.connections[0]!.socket.pong();
    p.connections[0]!.send({ type: "event", name: "session.removed", value: { sessionId: "a" } });
    await vi.waitFor(() => expect(seen.messages).toBe(2));
    expect(seen.closed).toBe(false);
  });
});

describe("Node socket factory: the silence watchdog", () => {
  it("drops a socket whose host upgraded it and then said nothing at all", async () => {
    // no hello, no ping: only the upgrade itself was heard
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, handleProtocols: () => SUBPROTOCOL });
    await once(wss, "listening");
    cleanups.push(async () => {
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    });
    const { port } = wss.address() as AddressInfo;
    const factory = createNodeSocketFactory({ silenceTimeoutMs: 150 });
    const seen = watch(factory(`ws://127.0.0.1:${port}/api/remote.mux`, "t"));
    await vi.waitFor(() => expect(seen.opened).toBe(true));
    await vi.waitFor(() => expect(seen.closed).toBe(true), { timeout: 5_000 });
  });

  const silenceMs = 500;
  const beats: [string, (like: WebSocketLike, host: PeerConnection) => void][] = [
    [
      "frames from the host",
      (_like, host) => host.send({ type: "event", name: "session.removed", value: { sessionId: "a" } }),
    ],
    ["pongs answering its own pings", (like) => like.keepAlivePing?.()],
    // the socket only answers these (its pong is outgoing): nothing reaches onmessage
    ["the host's pings alone", (_like, host) => host.socket.ping()],
  ];

  it.each(beats)("%s keep a socket alive well past the silence timeout", async (_what, beat) => {
    const p = await peer();
    const like = createNodeSocketFactory({ silenceTimeoutMs: silenceMs })(p.url, "t");
    const seen = watch(like);
    await vi.waitFor(() => expect(seen.opened).toBe(true));
    const host = p.connections[0]!;
    // twenty beats a tenth of the timeout apart: twice the timeout in all
    for (let i = 0; i < 20; i += 1) {
      beat(like, host);
      await new Promise((resolve) => setTimeout(resolve, silenceMs / 10));
      expect(seen.closed).toBe(false);
    }
    expect(p.connections).toHaveLength(1);
  });

  it("a closed socket's silence timer is gone with it", async () => {
    const p = await peer();
    const silenceMs = 150;
    const like = createNodeSocketFactory({ silenceTimeoutMs: silenceMs })(p.url, "t");
    const seen = watch(like);
    await vi.waitFor(() => expect(seen.messages).toBe(1));
    const terminate = vi.spyOn(like as Required<WebSocketLike>, "terminate");
    like.close(1000);
    await vi.waitFor(() => expect(seen.closed).toBe(true));
    // a watchdog armed before the close is due before a timer of the same length set after it
    await new Promise((resolve) => setTimeout(resolve, silenceMs));
    expect(terminate).not.toHaveBeenCalled();
  });
});
