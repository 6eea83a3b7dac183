import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { createClient } from "../../src/client/client.js";
import { Connection, type ConnectionOptions } from "../../src/client/connection.js";
import {
  browserNetworkSignals,
  type NetworkSignal,
  type NetworkSignals,
} from "../../src/client/network-signals.js";
import type { WebSocketLike } from "../../src/client/socket.js";

/**
 * The connection's clocks, on fake timers: each reconnect wait is the delay its state names (drawn
 * from the client's own random source), no attempt comes early, a refused connection waits for the
 * caller with no timer at all; a socket that cannot ping (a browser's) is probed with a frame of
 * its own and dropped at once when nothing answers. Sockets are scripted by the test.
 */

/** A socket the test drives: it fails its connect, or opens and says hello, when told to. */
class ScriptedSocket implements WebSocketLike {
  binaryType = "";
  readyState = 0;
  onopen: WebSocketLike["onopen"] = null;
  onmessage: WebSocketLike["onmessage"] = null;
  onclose: WebSocketLike["onclose"] = null;
  onerror: WebSocketLike["onerror"] = null;
  onheartbeat: WebSocketLike["onheartbeat"] = null;
  /** The frames the client sent, decoded. */
  readonly sent: { type: string; id?: number }[] = [];
  closedWith: [number | undefined, string | undefined] | undefined;

  constructor(
    private readonly status: number | undefined,
    /** The token the client made this socket with. */
    readonly token?: string,
  ) {}

  send(data: Uint8Array): void {
    this.sent.push(decodeFrame(data) as { type: string; id?: number });
  }
  /** As a browser's: the close event comes later, and only when the host answers (a client's close). */
  close(code?: number, reason?: string): void {
    this.closedWith = [code, reason];
    if (code === 1000) queueMicrotask(() => this.onclose?.({ code: 1000, reason: reason ?? "" }));
  }
  upgradeStatus(): Promise<number | undefined> {
    return Promise.resolve(this.status);
  }
  /** The connect failed: nothing listened (no status), or the host answered the upgrade with one. */
  fail(): void {
    this.onclose?.({ code: 1006, reason: "" });
  }
  /** The upgrade went through and the host said hello. */
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
    this.receive({ type: "hello", protocol: 1, hostId: "h", generation: "g1", serverTime: 0 });
  }
  receive(frame: Record<string, unknown>): void {
    const bytes = encodeFrame(frame);
    this.onmessage?.({ data: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) });
  }
}

/** `factoryThrowsFirst`: the first connect throws in the factory, as a browser's constructor can. */
function scriptedConnection(
  status?: number,
  options: Partial<ConnectionOptions> = {},
  factoryThrowsFirst = false,
) {
  const sockets: ScriptedSocket[] = [];
  let calls = 0;
  const connection = new Connection({
    url: "ws://127.0.0.1:9/api/remote.mux",
    token: "t",
    socketFactory: (_url, token) => {
      calls += 1;
      if (factoryThrowsFirst && calls === 1) throw new SyntaxError("bad url");
      const socket = new ScriptedSocket(status, token);
      sockets.push(socket);
      return socket;
    },
    backoff: { baseMs: 1_000, capMs: 8_000 },
    random: () => 0.5,
    keepAlive: false,
    ...options,
  });
  return { connection, sockets };
}

/** Closes the connection, letting the closing handshake's microtasks and timers run. */
async function closeScripted(connection: Connection): Promise<void> {
  const closing = connection.close();
  await vi.advanceTimersByTimeAsync(1_000);
  await closing;
}

/**
 * Fails the newest socket and checks the backoff that follows: named `attempt` and `delayMs`, no
 * new socket a millisecond before its end, the next one at its end.
 */
async function failAndWaitOut(
  { connection, sockets }: ReturnType<typeof scriptedConnection>,
  attempt: number,
  delayMs: number,
): Promise<void> {
  const before = sockets.length;
  sockets.at(-1)!.fail();
  await vi.advanceTimersByTimeAsync(0);
  expect(connection.state).toMatchObject({ name: "backoff", attempt, delayMs });
  await vi.advanceTimersByTimeAsync(delayMs - 1);
  expect(sockets).toHaveLength(before);
  await vi.advanceTimersByTimeAsync(1);
  expect(sockets).toHaveLength(before + 1);
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe("client reconnect timing", () => {
  it("waits out each backoff delay, drawn from the client's random source, before the next attempt", async () => {
    const scripted = scriptedConnection();
    for (const [attempt, delayMs] of [
      [1, 500],
      [2, 1_000],
      [3, 2_000],
    ] as const) {
      await failAndWaitOut(scripted, attempt, delayMs);
      expect(scripted.connection.state).toMatchObject({ name: "connecting", attempt, socketId: attempt + 1 });
    }
    await closeScripted(scripted.connection);
  });

  it("reconnectNow cuts a backoff short, again after the wait it cut would have ended", async () => {
    const scripted = scriptedConnection();
    const { connection, sockets } = scripted;
    sockets[0]!.fail();
    await vi.advanceTimersByTimeAsync(0);
    connection.reconnectNow();
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets).toHaveLength(2);
    sockets[1]!.fail();
    await vi.advanceTimersByTimeAsync(0);
    expect(connection.state).toMatchObject({ name: "backoff", attempt: 2, delayMs: 1_000 });
    // past the end of the first wait (500 ms): its timer must be gone, not end this wait for it
    await vi.advanceTimersByTimeAsync(600);
    expect(sockets).toHaveLength(2);
    connection.reconnectNow();
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets).toHaveLength(3);
    // and the next wait is the one its state names, in full
    await failAndWaitOut(scripted, 3, 2_000);
    await closeScripted(connection);
  });

  it("a new token during a backoff is used at the next attempt, which still waits the backoff out", async () => {
    const scripted = scriptedConnection();
    const { connection, sockets } = scripted;
    sockets[0]!.fail();
    await vi.advanceTimersByTimeAsync(0);
    connection.setToken("fresh");
    await vi.advanceTimersByTimeAsync(499);
    expect(sockets).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(sockets.map((socket) => socket.token)).toEqual(["t", "fresh"]);
    await closeScripted(connection);
  });

  it("a refused connection waits for the caller with no timer pending, however long", async () => {
    const { connection, sockets } = scriptedConnection(401);
    sockets[0]!.fail();
    await vi.advanceTimersByTimeAsync(0);
    expect(connection.state).toEqual({ name: "unauthorized", status: 401 });
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(sockets).toHaveLength(1);
    await closeScripted(connection);
  });

  it("a socket factory that throws counts as a failed connect: the client backs off and tries again", async () => {
    // as a browser's WebSocket constructor throws for a URL it will not open
    const { connection, sockets } = scriptedConnection(undefined, {}, true);
    await vi.advanceTimersByTimeAsync(0);
    expect(connection.state).toMatchObject({ name: "backoff", attempt: 1, delayMs: 500 });
    await vi.advanceTimersByTimeAsync(500);
    expect(sockets).toHaveLength(1);
    sockets[0]!.open();
    expect(connection.state.name).toBe("open");
    await closeScripted(connection);
  });
});

describe("client keepalive on a socket that cannot ping", () => {
  it("turned off, never probes a quiet socket nor drops it, however long it stays quiet", async () => {
    const { connection, sockets } = scriptedConnection(undefined, { keepAlive: false });
    const socket = sockets[0]!;
    socket.open();
    await connection.whenOpen();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(socket.sent).toEqual([]);
    expect(socket.closedWith).toBeUndefined();
    expect(connection.state.name).toBe("open");
    await closeScripted(connection);
  });

  it("probes a quiet socket with a frame whose id nothing else uses, and drops it when nothing answers", async () => {
    const keepAlive = { intervalMs: 10_000, pongTimeoutMs: 5_000 };
    const { connection, sockets } = scriptedConnection(undefined, { keepAlive });
    const socket = sockets[0]!;
    socket.open();
    const link = await connection.whenOpen();
    const first = link.call("session.list", {}).catch(() => undefined);
    await vi.advanceTimersByTimeAsync(keepAlive.intervalMs);
    const second = link.call("session.list", {}).catch(() => undefined);
    expect(socket.sent.map((frame) => [frame.type, frame.id])).toEqual([
      ["call", 1],
      ["close", 2],
      ["call", 3],
    ]);
    // nothing arrives: at the deadline (once what came in by then is read, a turn of the loop
    // later) the socket is closed as dead and given up on at once
    await vi.advanceTimersByTimeAsync(keepAlive.pongTimeoutMs - 1);
    expect(connection.state.name).toBe("open");
    await vi.advanceTimersByTimeAsync(2);
    expect(socket.closedWith).toEqual([4000, "keepalive timeout"]);
    expect(connection.state).toMatchObject({ name: "backoff", attempt: 1 });
    await Promise.all([first, second]);
    await closeScripted(connection);
  });
});

describe("client keepalive by default", () => {
  it("probes after 10 s of quiet and drops the socket 5 s after the probe when nothing answers", async () => {
    const { connection, sockets } = scriptedConnection(undefined, { keepAlive: undefined });
    const socket = sockets[0]!;
    socket.open();
    await connection.whenOpen();
    await vi.advanceTimersByTimeAsync(9_999);
    expect(socket.sent).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(socket.sent.map((frame) => frame.type)).toEqual(["close"]);
    await vi.advanceTimersByTimeAsync(4_999);
    expect(connection.state.name).toBe("open");
    await vi.advanceTimersByTimeAsync(2);
    expect(socket.closedWith).toEqual([4000, "keepalive timeout"]);
    await closeScripted(connection);
  });
});

describe("client keepalive after a stall of the client's own", () => {
  const keepAlive = { intervalMs: 10_000, pongTimeoutMs: 5_000 };
  const answers: [string, (socket: ScriptedSocket, probe: { id?: number }) => void][] = [
    ["the probe's answer", (socket, probe) => socket.receive({ type: "end", id: probe.id })],
    ["a pong", (socket) => socket.onheartbeat?.()],
  ];

  it.each(answers)(
    "keeps the socket when %s came in while the event loop was held past the probe's deadline",
    async (_answer, answer) => {
      const { connection, sockets } = scriptedConnection(undefined, { keepAlive });
      const socket = sockets[0]!;
      socket.open();
      await connection.whenOpen();
      await vi.advanceTimersByTimeAsync(keepAlive.intervalMs);
      const probe = socket.sent[0]!;
      expect(probe.type).toBe("close");
      // The loop was held (a busy tab) past the deadline while the answer arrived: once it runs
      // again, the late timer runs first (timers before I/O), and only then is the answer read.
      vi.advanceTimersToNextTimer();
      answer(socket, probe);
      await vi.advanceTimersByTimeAsync(1);
      expect(socket.closedWith).toBeUndefined();
      expect(connection.state.name).toBe("open");
      // the answer restarted the quiet wait: the next probe comes a whole interval after it
      await vi.advanceTimersByTimeAsync(keepAlive.intervalMs - 2);
      expect(socket.sent).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      expect(socket.sent).toHaveLength(2);
      await closeScripted(connection);
    },
  );

  it("still drops the socket when nothing came in by the time the I/O held behind the stall is read", async () => {
    const { connection, sockets } = scriptedConnection(undefined, { keepAlive });
    const socket = sockets[0]!;
    socket.open();
    await connection.whenOpen();
    await vi.advanceTimersByTimeAsync(keepAlive.intervalMs);
    vi.advanceTimersToNextTimer();
    expect(socket.closedWith).toBeUndefined();
    // the next turn of the loop (a timer of 0 ms is one of 1 ms, in Node as on fake timers)
    await vi.advanceTimersByTimeAsync(1);
    expect(socket.closedWith).toEqual([4000, "keepalive timeout"]);
    expect(connection.state).toMatchObject({ name: "backoff", attempt: 1 });
    await closeScripted(connection);
  });
});

describe("a call waiting for a socket past its deadline", () => {
  /** A client whose sockets the test opens; none has opened yet. */
  function scriptedClient() {
    const sockets: ScriptedSocket[] = [];
    const client = createClient({
      url: "ws://127.0.0.1:9/api/remote.mux",
      token: "t",
      socketFactory: () => {
        const socket = new ScriptedSocket(undefined);
        sockets.push(socket);
        return socket;
      },
      keepAlive: false,
      network: false,
    });
    return { client, sockets };
  }

  it("fails with its timeout and is never sent when the socket opens after the deadline but before its timer ran", async () => {
    const { client, sockets } = scriptedClient();
    const call = client.list({}, { timeoutMs: 30_000 }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(client.waitingForSocket).toBe(1);
    // the machine slept (or the loop was held) for a minute: the clock moved, no timer has run yet,
    // and the host's hello is read first
    vi.setSystemTime(Date.now() + 60_000);
    sockets[0]!.open();
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets[0]!.sent).toEqual([]);
    expect(await call).toMatchObject({
      code: "timeout",
      message: "session.list: no answer within 30000 ms (the socket opened only after it)",
      data: { method: "session.list", timeoutMs: 30_000, sent: false },
    });
    expect(client.waitingForSocket).toBe(0);
    // a call made now is sent as usual
    void client.list({}).catch(() => undefined);
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets[0]!.sent.map((frame) => frame.type)).toEqual(["call"]);
    const closing = client.close();
    await vi.advanceTimersByTimeAsync(1_000);
    await closing;
  });

  it("is sent when the socket opens a millisecond before its deadline", async () => {
    const { client, sockets } = scriptedClient();
    void client.list({}, { timeoutMs: 30_000 }).catch(() => undefined);
    vi.setSystemTime(Date.now() + 29_999);
    sockets[0]!.open();
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets[0]!.sent.map((frame) => frame.type)).toEqual(["call"]);
    const closing = client.close();
    await vi.advanceTimersByTimeAsync(1_000);
    await closing;
  });

  it("fails with its timeout, unsent, when the socket opens exactly at its deadline", async () => {
    const { client, sockets } = scriptedClient();
    const call = client.list({}, { timeoutMs: 30_000 }).catch((e: unknown) => e);
    vi.setSystemTime(Date.now() + 30_000);
    sockets[0]!.open();
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets[0]!.sent).toEqual([]);
    expect(await call).toMatchObject({ code: "timeout", data: { sent: false } });
    const closing = client.close();
    await vi.advanceTimersByTimeAsync(1_000);
    await closing;
  });
});

/** Network hints the test gives by hand, as a browser's `online`/`offline`/`visibilitychange`. */
function scriptedNetwork() {
  const listeners = new Set<(signal: NetworkSignal) => void>();
  const network: NetworkSignals = (listener) => {
    listeners.add(listener);
    return () => listeners.delete(listener);
  };
  const say = (signal: NetworkSignal) => {
    for (const listener of listeners) listener(signal);
  };
  return { network, listeners, say };
}

describe("client on network hints", () => {
  const keepAlive = { intervalMs: 10_000, pongTimeoutMs: 5_000 };

  it("probes an open socket at once on each hint and drops it when nothing answers within the probe's wait", async () => {
    const hints = scriptedNetwork();
    const { connection, sockets } = scriptedConnection(undefined, { keepAlive, network: hints.network });
    const socket = sockets[0]!;
    socket.open();
    await connection.whenOpen();
    hints.say("offline");
    expect(socket.sent.map((frame) => frame.type)).toEqual(["close"]);
    // a second hint while the probe waits sends nothing more and does not move its deadline
    await vi.advanceTimersByTimeAsync(keepAlive.pongTimeoutMs - 1);
    hints.say("online");
    expect(socket.sent).toHaveLength(1);
    expect(connection.state.name).toBe("open");
    // the deadline, and the turn of the loop after it
    await vi.advanceTimersByTimeAsync(2);
    expect(socket.closedWith).toEqual([4000, "keepalive timeout"]);
    expect(connection.state).toMatchObject({ name: "backoff", attempt: 1 });
    await closeScripted(connection);
    expect(hints.listeners.size).toBe(0);
  });

  it("an answered probe keeps the socket; the quiet wait starts again from the answer", async () => {
    const hints = scriptedNetwork();
    const { connection, sockets } = scriptedConnection(undefined, { keepAlive, network: hints.network });
    const socket = sockets[0]!;
    socket.open();
    await connection.whenOpen();
    hints.say("resumed");
    const probe = socket.sent[0]!;
    expect(probe.type).toBe("close");
    await vi.advanceTimersByTimeAsync(100);
    socket.receive({ type: "end", id: probe.id });
    await vi.advanceTimersByTimeAsync(keepAlive.intervalMs - 1);
    expect(socket.sent).toHaveLength(1);
    expect(connection.state.name).toBe("open");
    await vi.advanceTimersByTimeAsync(1);
    expect(socket.sent).toHaveLength(2);
    expect(socket.closedWith).toBeUndefined();
    await closeScripted(connection);
  });

  it("with the keepalive turned off, a hint to an open socket sends nothing and keeps it", async () => {
    const hints = scriptedNetwork();
    const { connection, sockets } = scriptedConnection(undefined, {
      keepAlive: false,
      network: hints.network,
    });
    sockets[0]!.open();
    await connection.whenOpen();
    hints.say("offline");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sockets[0]!.sent).toEqual([]);
    expect(connection.state.name).toBe("open");
    await closeScripted(connection);
  });

  it("`online` or a page shown again ends a backoff wait at once; `offline` leaves it to run out", async () => {
    const hints = scriptedNetwork();
    const scripted = scriptedConnection(undefined, { network: hints.network });
    const { connection, sockets } = scripted;
    sockets[0]!.fail();
    await vi.advanceTimersByTimeAsync(0);
    expect(connection.state).toMatchObject({ name: "backoff", attempt: 1, delayMs: 500 });
    hints.say("offline");
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets).toHaveLength(1);
    hints.say("online");
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets).toHaveLength(2);
    sockets[1]!.fail();
    await vi.advanceTimersByTimeAsync(0);
    expect(connection.state).toMatchObject({ name: "backoff", attempt: 2 });
    hints.say("resumed");
    await vi.advanceTimersByTimeAsync(0);
    expect(sockets).toHaveLength(3);
    await closeScripted(connection);
  });

  it("reads the browser's hints by default: online, offline, and a page shown again (not hidden)", async () => {
    const document = Object.assign(new EventTarget(), { visibilityState: "hidden" });
    const window = Object.assign(new EventTarget(), { document });
    const signals = browserNetworkSignals(window)!;
    const seen: NetworkSignal[] = [];
    const stop = signals((signal) => seen.push(signal));
    window.dispatchEvent(new Event("offline"));
    // hidden: nothing to say yet
    document.dispatchEvent(new Event("visibilitychange"));
    expect(seen).toEqual(["offline"]);
    document.visibilityState = "visible";
    document.dispatchEvent(new Event("visibilitychange"));
    window.dispatchEvent(new Event("online"));
    expect(seen).toEqual(["offline", "resumed", "online"]);
    stop();
    window.dispatchEvent(new Event("offline"));
    window.dispatchEvent(new Event("online"));
    document.dispatchEvent(new Event("visibilitychange"));
    expect(seen).toHaveLength(3);
    // a worker's scope: no document, online and offline only
    const worker = new EventTarget();
    const fromWorker: NetworkSignal[] = [];
    browserNetworkSignals(worker)!((signal) => fromWorker.push(signal));
    worker.dispatchEvent(new Event("online"));
    expect(fromWorker).toEqual(["online"]);
    // no such scope (Node), or one that cannot stop listening: no hints
    expect(browserNetworkSignals({})).toBeUndefined();
    expect(browserNetworkSignals({ addEventListener: () => undefined })).toBeUndefined();
    expect(browserNetworkSignals({ removeEventListener: () => undefined })).toBeUndefined();

    // the global scope is the default source, and `false` ignores it
    vi.stubGlobal("addEventListener", window.addEventListener.bind(window));
    vi.stubGlobal("removeEventListener", window.removeEventListener.bind(window));
    try {
      const byDefault = scriptedConnection(undefined, { keepAlive });
      const ignoring = scriptedConnection(undefined, { keepAlive, network: false });
      for (const { sockets } of [byDefault, ignoring]) sockets[0]!.open();
      window.dispatchEvent(new Event("offline"));
      expect(byDefault.sockets[0]!.sent.map((frame) => frame.type)).toEqual(["close"]);
      expect(ignoring.sockets[0]!.sent).toEqual([]);
      await closeScripted(byDefault.connection);
      await closeScripted(ignoring.connection);
      // closed: a hint reaches neither
      window.dispatchEvent(new Event("online"));
      expect(byDefault.sockets[0]!.sent).toHaveLength(1);
    } finally {
      vi.unstubAllGlobals();
    }
  });
});
