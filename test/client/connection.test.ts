import { getEventListeners, once } from "node:events";
import { firstValueFrom, type Subscription } from "rxjs";
import { afterEach, describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { encodeFrame } from "../../protocol/codec.js";
import type { HelloFrame } from "../../protocol/index.js";
import { type CallMethod, Methods } from "../../protocol/index.js";
import type { ConnectionState } from "../../src/client/connection-state.js";
import { createClient, type SessionmuxClient } from "../../src/client/index.js";
import { createNodeClient, createNodeSocketFactory } from "../../src/client/node.js";
import {
  ConnectionRefusedError,
  RemoteError,
  RemoteStreamCarrierError,
} from "../../src/client/remote-errors.js";
import { base64Url, sendIfOpen, type WebSocketLike } from "../../src/client/socket.js";
import { peerFixture } from "./peer-fixture.js";

const { cleanups, peer, track } = peerFixture();
const fast = { baseMs: 5, capMs: 20 };
const states = (client: SessionmuxClient) => {
  const seen: ConnectionState[] = [];
  const sub = client.state$.subscribe((s) => seen.push(s));
  cleanups.push(async () => sub.unsubscribe());
  return seen;
};

describe("client connection", () => {
  it("Node client authenticates with the Authorization header and the sessionmux.v1 subprotocol", async () => {
    const p = await peer();
    const client = track(createNodeClient({ url: p.url, token: "tok en/+" }));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const req = p.connections[0]!.request;
    expect(req.headers.authorization).toBe("Bearer tok en/+");
    expect(req.headers["sec-websocket-protocol"]).toBe("sessionmux.v1");
    expect(req.headers["sec-websocket-extensions"]).toBeUndefined();
    expect(client.hello).toMatchObject({ hostId: "fake", generation: "g1" });
  });

  it("browser-style client puts the token in a bearer.<base64url> subprotocol, never a header", async () => {
    const p = await peer();
    const client = track(createClient({ url: p.url, token: "tok en/+?", WebSocket }));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const req = p.connections[0]!.request;
    expect(req.headers.authorization).toBeUndefined();
    const offered = String(req.headers["sec-websocket-protocol"])
      .split(",")
      .map((e) => e.trim());
    expect(offered).toEqual(["sessionmux.v1", `bearer.${base64Url("tok en/+?")}`]);
    expect(base64Url("tok en/+?")).toMatch(/^[A-Za-z0-9_-]+$/);
    // "~~~???é" is "fn5+Pz8/w6k=" in plain base64: each of +, / and = has its base64url stand-in
    const awkward = "~~~???é";
    expect(Buffer.from(awkward).toString("base64")).toMatch(/\+.*\/.*=$/);
    expect(base64Url(awkward)).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(Buffer.from(base64Url(awkward), "base64url").toString()).toBe(awkward);
  });

  it("keeps the socket open with zero streams", async () => {
    const p = await peer();
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const sub = client.open("session.control", {}).subscribe();
    await vi.waitFor(() => expect(p.connections[0]!.received.some((f) => f.type === "open")).toBe(true));
    sub.unsubscribe();
    await vi.waitFor(() => expect(p.connections[0]!.received.some((f) => f.type === "close")).toBe(true));
    expect(client.state.name).toBe("open");
    expect(p.connections).toHaveLength(1);
  });

  it("answers calls and turns host errors into terminal RemoteErrors with code and category", async () => {
    const p = await peer({
      onCall: (conn, f) => {
        if (f.method === "session.models") return { models: [], default: "demo" };
        conn.send({
          type: "error",
          id: f.id,
          error: { code: "session_not_found", message: "no", category: "business", retryable: false },
        });
        return undefined;
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    await expect(client.call("session.models", {})).resolves.toEqual({ models: [], default: "demo" });
    const error = await client.page({ sessionId: "nope" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({ code: "session_not_found", category: "business", terminal: true });
  });

  it("a lost socket fails a non-resendable call with a carrier error but resends a read", async () => {
    let pageCalls = 0;
    const p = await peer({
      onCall: (conn, f) => {
        if (f.method === "session.page") {
          pageCalls += 1;
          if (pageCalls === 1) conn.socket.terminate();
          else return { ok: true };
        }
        if (f.method === "session.rename") conn.socket.terminate();
        return undefined;
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: fast }));
    const renamed = await client
      .call("session.rename", { sessionId: "s", title: "x" })
      .catch((e: unknown) => e);
    expect(renamed).toBeInstanceOf(RemoteStreamCarrierError);
    expect(renamed).toMatchObject({ reason: "socket_lost", retryable: true });
    await expect(client.page({ sessionId: "s" })).resolves.toEqual({ ok: true });
    expect(pageCalls).toBe(2);
  });

  it("a host error answering a call or a stream goes to it alone; one for no call, or a call gone, to onError", async () => {
    const wireError = (code: string) => ({ code, message: code, category: "business", retryable: false });
    const p = await peer({
      onCall: (conn, f) => {
        conn.send({ type: "error", id: f.id, error: wireError("session_not_found") });
        return undefined;
      },
      onOpen: (conn, f) => conn.send({ type: "error", id: f.id, error: wireError("forbidden") }),
    });
    const reported: string[] = [];
    const client = track(
      createNodeClient({ url: p.url, token: "t", onError: (error) => reported.push(error.code) }),
    );
    await expect(client.page({ sessionId: "s" })).rejects.toMatchObject({ code: "session_not_found" });
    const streamError = await new Promise((resolve) => {
      client.open("session.control", {}).subscribe({ error: resolve });
    });
    expect(streamError).toMatchObject({ code: "forbidden" });
    const conn = p.connections[0]!;
    conn.send({ type: "error", error: wireError("internal_error") });
    conn.send({ type: "error", id: 9_999, error: wireError("overloaded") });
    await vi.waitFor(() => expect(reported).toEqual(["internal_error", "overloaded"]));
    // nothing more: the call's and the stream's errors were theirs alone
    await expect(client.call("session.models", {})).rejects.toMatchObject({ code: "session_not_found" });
    expect(reported).toEqual(["internal_error", "overloaded"]);
  });

  // the contract of §4–§5: reads, prompts (by clientMessageId), answers (the winning one repeats)
  // and acks (compare-and-clear) may be sent twice; anything else may have taken effect already
  const resendable = new Set([
    "session.list",
    "session.page",
    "session.search",
    "session.models",
    "session.attachment",
    "session.prompt",
    "session.respond",
    "session.ack",
  ]);
  const callMethods = Object.entries(Methods)
    .filter(([, spec]) => spec.kind === "call")
    .map(([name]) => name as CallMethod);

  it.each(callMethods)(
    "%s, its socket dying under it, is sent again only if it is safe to",
    async (method) => {
      let seen = 0;
      const p = await peer({
        onCall: (conn, f) => {
          if (f.method !== method) return undefined;
          seen += 1;
          if (seen === 1) conn.socket.terminate();
          else return { ok: true };
          return undefined;
        },
        // a host from before `session.download`: the client reads attachments with the call
        onOpen: (conn, f) =>
          conn.send({
            type: "error",
            id: f.id,
            error: { code: "unknown_method", message: f.method, category: "protocol", retryable: false },
          }),
      });
      const client = track(createNodeClient({ url: p.url, token: "t", backoff: fast }));
      const outcome = await client.call(method, {} as never).catch((e: unknown) => e);
      if (resendable.has(method)) {
        expect(outcome).toEqual({ ok: true });
        expect(seen).toBe(2);
      } else {
        expect(outcome).toBeInstanceOf(RemoteStreamCarrierError);
        expect(outcome).toMatchObject({ reason: "socket_lost" });
        expect(seen).toBe(1);
      }
    },
  );

  it("a resent prompt carries the same generated clientMessageId", async () => {
    const seenIds: string[] = [];
    const p = await peer({
      onCall: (conn, f) => {
        seenIds.push((f.params as { clientMessageId: string }).clientMessageId);
        if (seenIds.length === 1) conn.socket.terminate();
        else return { queued: false, seq: 2 };
        return undefined;
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: fast }));
    await expect(client.prompt({ sessionId: "s", text: "hi" })).resolves.toEqual({ queued: false, seq: 2 });
    expect(seenIds).toHaveLength(2);
    expect(seenIds[0]).toMatch(/^[A-Za-z0-9_-]{1,128}$/);
    expect(seenIds[1]).toBe(seenIds[0]);
  });

  it("an open stream errors with RemoteStreamCarrierError when its socket dies", async () => {
    const p = await peer({
      onOpen: (conn, f) => conn.send({ type: "item", id: f.id, value: { kind: "x" } }),
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: fast }));
    const items: unknown[] = [];
    let failure: unknown;
    const sub: Subscription = client.open("session.control", {}).subscribe({
      next: (v) => items.push(v),
      error: (e: unknown) => {
        failure = e;
      },
    });
    cleanups.push(async () => sub.unsubscribe());
    await vi.waitFor(() => expect(items).toHaveLength(1));
    p.killAll();
    await vi.waitFor(() => expect(failure).toBeInstanceOf(RemoteStreamCarrierError));
  });

  it("reconnects after a failed first connect with backoff, exposing the next attempt time", async () => {
    const p = await peer({ refuse: (attempt) => (attempt <= 3 ? 503 : undefined) });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: { baseMs: 10, capMs: 40 } }));
    const seen = states(client);
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const names = seen.map((s) => s.name);
    expect(names).toEqual([
      "connecting",
      "backoff",
      "connecting",
      "backoff",
      "connecting",
      "backoff",
      "connecting",
      "open",
    ]);
    const backoffs = seen.filter((s) => s.name === "backoff");
    for (const [i, s] of backoffs.entries()) {
      expect(s.attempt).toBe(i + 1);
      expect(s.delayMs).toBeLessThan(Math.min(40, 10 * 2 ** i));
      expect(s.nextAttemptAt).toBeGreaterThan(0);
    }
  });

  it("resets the attempt count after a successful hello", async () => {
    const p = await peer();
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: fast }));
    const seen = states(client);
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    p.killAll();
    await vi.waitFor(() => expect(p.connections).toHaveLength(2));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    p.killAll();
    await vi.waitFor(() => expect(p.connections).toHaveLength(3));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const attempts = seen.filter((s) => s.name === "backoff").map((s) => s.attempt);
    expect(attempts).toEqual([1, 1]);
  });

  it("a refused token is the terminal unauthorized state until setToken supplies a new one", async () => {
    let good = "old";
    const p = await peer({
      refuse: () => (p.connections.length === 0 && good === "old" ? 401 : undefined),
      onCall: () => ({ ok: true }),
    });
    const client = track(createNodeClient({ url: p.url, token: "wrong", backoff: fast }));
    const error = await client.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionRefusedError);
    expect(error).toMatchObject({ code: "unauthorized", status: 401 });
    expect(client.state).toEqual({ name: "unauthorized", status: 401 });
    // No retry loop: a second call fails at once and the host saw one attempt.
    await expect(client.list()).rejects.toMatchObject({ code: "unauthorized" });
    expect(p.attempts).toBe(1);

    good = "new";
    client.setToken("new-token");
    await expect(client.list()).resolves.toEqual({ ok: true });
    expect(p.connections[0]!.request.headers.authorization).toBe("Bearer new-token");
  });

  it("delivers notifications to handlers until they unsubscribe", async () => {
    const p = await peer();
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const got: string[] = [];
    const off = client.on("session.removed", (v) => got.push(v.sessionId));
    p.connections[0]!.send({ type: "event", name: "session.removed", value: { sessionId: "a" } });
    await vi.waitFor(() => expect(got).toEqual(["a"]));
    off();
    p.connections[0]!.send({ type: "event", name: "session.removed", value: { sessionId: "b" } });
    p.connections[0]!.send({ type: "event", name: "session.removed", value: { sessionId: "c" } });
    const probe: string[] = [];
    client.on("session.removed", (v) => probe.push(v.sessionId));
    await vi.waitFor(() => expect(probe).toEqual(["b", "c"]));
    expect(got).toEqual(["a"]);
  });

  it("calls every handler registered for a notification, each until it unsubscribes", async () => {
    const p = await peer();
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const first: string[] = [];
    const second: string[] = [];
    const offFirst = client.on("session.removed", (v) => first.push(v.sessionId));
    client.on("session.removed", (v) => second.push(v.sessionId));
    p.connections[0]!.send({ type: "event", name: "session.removed", value: { sessionId: "a" } });
    await vi.waitFor(() => expect(second).toEqual(["a"]));
    expect(first).toEqual(["a"]);
    offFirst();
    p.connections[0]!.send({ type: "event", name: "session.removed", value: { sessionId: "b" } });
    await vi.waitFor(() => expect(second).toEqual(["a", "b"]));
    expect(first).toEqual(["a"]);
  });

  it("hello$ emits the hello of every connect and completes when the client closes", async () => {
    let generation = 0;
    const p = await peer({ generation: () => `g${++generation}` });
    const client = createNodeClient({ url: p.url, token: "t", backoff: fast });
    const hellos: HelloFrame[] = [];
    let completed = false;
    client.hello$.subscribe({ next: (h) => hellos.push(h), complete: () => (completed = true) });
    await vi.waitFor(() => expect(hellos.map((h) => h.generation)).toEqual(["g1"]));
    p.killAll();
    await vi.waitFor(() => expect(hellos.map((h) => h.generation)).toEqual(["g1", "g2"]));
    expect(completed).toBe(false);
    await client.close();
    expect(completed).toBe(true);
  });

  it("a stream unsubscribed before the socket opens never sends open to the host", async () => {
    const p = await peer({ onCall: () => ({ ok: true }) });
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    expect(client.state.name).toBe("connecting");
    client.open("session.control", {}).subscribe().unsubscribe();
    // the call waits for the same socket, behind the stream: once it is answered, an open would be in
    await expect(client.call("session.models", {})).resolves.toEqual({ ok: true });
    expect(p.connections[0]!.received.map((f) => f.type)).toEqual(["call"]);
  });

  it("draws each backoff delay from the random source it was given", async () => {
    const p = await peer({ refuse: () => 503 });
    const client = track(
      createNodeClient({
        url: p.url,
        token: "t",
        backoff: { baseMs: 60_000, capMs: 60_000 },
        random: () => 0.25,
      }),
    );
    await vi.waitFor(() => expect(client.state.name).toBe("backoff"));
    expect(client.state).toMatchObject({ attempt: 1, delayMs: 0.25 * 60_000 });
  });

  it("a settled call leaves no listener on the caller's signal", async () => {
    const controller = new AbortController();
    let listenersInFlight: number | undefined;
    const p = await peer({
      onCall: () => {
        listenersInFlight = getEventListeners(controller.signal, "abort").length;
        return { ok: true };
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    await expect(client.list({}, { signal: controller.signal })).resolves.toEqual({ ok: true });
    expect(listenersInFlight).toBe(1);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });

  it("without onError, reports a host error tied to no call with console.warn, naming its code", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    cleanups.push(async () => warn.mockRestore());
    const p = await peer();
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    const reported: string[] = [];
    client.errors$.subscribe((e) => reported.push(e.code));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    p.connections[0]!.send({
      type: "error",
      error: { code: "internal_error", message: "the store failed", category: "internal", retryable: false },
    });
    await vi.waitFor(() => expect(reported).toEqual(["internal_error"]));
    expect(warn.mock.calls).toEqual([["sessionmux client: internal_error: the store failed"]]);
  });

  it("close() rejects waiting calls with a client_closed carrier error and completes state$", async () => {
    const p = await peer({ refuse: () => 503 });
    const client = createNodeClient({ url: p.url, token: "t", backoff: { baseMs: 60_000, capMs: 60_000 } });
    await vi.waitFor(() => expect(client.state.name).toBe("backoff"));
    const pending = client.list().catch((e: unknown) => e);
    const done = firstValueFrom(client.state$, { defaultValue: undefined });
    await client.close();
    expect(await pending).toMatchObject({ reason: "client_closed", retryable: false });
    expect(client.state.name).toBe("closed");
    await done;
    const after = await client.list().catch((e: unknown) => e);
    expect(after).toBeInstanceOf(RemoteStreamCarrierError);
    expect(after).toMatchObject({ reason: "client_closed" });
  });
});

describe("client connection: the caller's hand", () => {
  it("close() fails a call in flight with client_closed, and state$ tells of the close once", async () => {
    const p = await peer();
    const client = createNodeClient({ url: p.url, token: "t" });
    const seen = states(client);
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const pending = client.list().catch((e: unknown) => e);
    await vi.waitFor(() => expect(p.connections[0]!.received.some((f) => f.type === "call")).toBe(true));
    await client.close();
    expect(await pending).toMatchObject({ reason: "client_closed", retryable: false });
    // the socket's own close, reported after, is no new state
    expect(seen.map((s) => s.name)).toEqual(["connecting", "open", "closed"]);
  });

  it("a call given an already aborted signal rejects at once, though no socket is open", async () => {
    const p = await peer({ refuse: () => 503 });
    const client = track(
      createNodeClient({ url: p.url, token: "t", backoff: { baseMs: 60_000, capMs: 60_000 } }),
    );
    await vi.waitFor(() => expect(client.state.name).toBe("backoff"));
    const error = await client.list({}, { signal: AbortSignal.abort("gone") }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "aborted", retryable: false });
    expect(client.state.name).toBe("backoff");
  });

  it("reconnectNow during a long backoff connects at once", async () => {
    const p = await peer({ refuse: (attempt) => (attempt === 1 ? 503 : undefined) });
    const client = track(
      createNodeClient({
        url: p.url,
        token: "t",
        backoff: { baseMs: 60_000, capMs: 60_000 },
        random: () => 0.5,
      }),
    );
    await vi.waitFor(() => expect(client.state.name).toBe("backoff"));
    client.reconnectNow();
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    expect(p.attempts).toBe(2);
  });

  it("reconnectNow while open keeps the socket it has", async () => {
    const p = await peer({ onCall: () => ({ ok: true }) });
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    client.reconnectNow();
    await expect(client.list()).resolves.toEqual({ ok: true });
    expect(p.connections).toHaveLength(1);
  });

  it("with keepalive off, a client connects, hears, calls and reconnects like any other", async () => {
    const p = await peer({ onCall: () => ({ ok: true }) });
    const client = track(createNodeClient({ url: p.url, token: "t", keepAlive: false, backoff: fast }));
    const got: string[] = [];
    client.on("session.removed", (v) => got.push(v.sessionId));
    await expect(client.list()).resolves.toEqual({ ok: true });
    // a host's ping is heard like any frame, with no keepalive to tell of it
    p.connections[0]!.socket.ping();
    p.connections[0]!.send({ type: "event", name: "session.removed", value: { sessionId: "a" } });
    await vi.waitFor(() => expect(got).toEqual(["a"]));
    p.killAll();
    await vi.waitFor(() => expect(p.connections).toHaveLength(2));
    await expect(client.list()).resolves.toEqual({ ok: true });
  });

  it("close() gives up on a host that never answers the closing handshake after its grace", async () => {
    const p = await peer();
    const client = createNodeClient({ url: p.url, token: "t" });
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    // the host stops reading: the client's close frame is never answered (ws itself would wait 30 s)
    (p.connections[0]!.socket as unknown as { _socket: { pause(): void } })._socket.pause();
    await client.close();
    expect(client.state.name).toBe("closed");
  }, 10_000);
});

describe("half-open sockets", () => {
  it("a Node socket that hears nothing (no ping, no frame) for the silence timeout is dropped and replaced", async () => {
    const p = await peer();
    const client = track(
      createClient({
        url: p.url,
        token: "t",
        socketFactory: createNodeSocketFactory({ silenceTimeoutMs: 150 }),
        backoff: fast,
      }),
    );
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    // The fake peer never pings: the client must give up on the silent socket and reconnect.
    await vi.waitFor(() => expect(p.connections.length).toBeGreaterThanOrEqual(2), { timeout: 5_000 });
  });

  it("pings keep a quiet socket alive", async () => {
    const p = await peer();
    const client = track(
      createClient({
        url: p.url,
        token: "t",
        // 20 pings' worth: a loaded machine that delays a few pings does not pass for silence
        socketFactory: createNodeSocketFactory({ silenceTimeoutMs: 1_000 }),
      }),
    );
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const pinger = setInterval(() => p.connections[0]?.socket.ping(), 50);
    cleanups.push(async () => clearInterval(pinger));
    // Poll well past the timeout: the one socket must still be the only one.
    const until = Date.now() + 2_500;
    await vi.waitFor(
      () => {
        expect(p.connections).toHaveLength(1);
        expect(Date.now()).toBeGreaterThan(until);
      },
      { timeout: 8_000, interval: 50 },
    );
  });
});

describe("a client made without a WebSocket class", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it("uses the global WebSocket, as a browser's, with the token as a subprotocol", async () => {
    vi.stubGlobal("WebSocket", WebSocket);
    const p = await peer();
    const client = track(createClient({ url: p.url, token: "t" }));
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    const offered = String(p.connections[0]!.request.headers["sec-websocket-protocol"]).split(",");
    expect(offered).toEqual(["sessionmux.v1", `bearer.${base64Url("t")}`]);
  });

  it("throws a TypeError naming both ways out where there is no global WebSocket", () => {
    vi.stubGlobal("WebSocket", undefined);
    let error: unknown;
    try {
      track(createClient({ url: "ws://127.0.0.1:9/api/remote.mux", token: "t" }));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TypeError);
    expect((error as TypeError).message).toBe(
      "no global WebSocket: pass options.WebSocket or use createNodeClient",
    );
  });
});

describe("sendIfOpen", () => {
  it("sends on an open socket and drops the frame for one closing or closed", async () => {
    const p = await peer();
    const socket = new WebSocket(p.url, ["sessionmux.v1"]);
    await once(socket, "open");
    const send = vi.spyOn(socket, "send");
    const like = socket as unknown as WebSocketLike;
    const frame = encodeFrame({ type: "call", id: 1, method: "session.models", params: {} });
    sendIfOpen(like, frame);
    await vi.waitFor(() => expect(p.connections[0]!.received.map((f) => f.type)).toEqual(["call"]));
    socket.close();
    expect(socket.readyState).toBe(WebSocket.CLOSING);
    sendIfOpen(like, frame);
    await once(socket, "close");
    sendIfOpen(like, frame);
    expect(send).toHaveBeenCalledOnce();
  });
});
