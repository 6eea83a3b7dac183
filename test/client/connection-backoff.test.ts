import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Connection } from "../../src/client/connection.js";
import type { WebSocketLike } from "../../src/client/socket.js";

/**
 * The reconnect loop's clock, on fake timers: each wait is the delay its state names (drawn from
 * the client's own random source), no attempt comes early, and a refused connection waits for the
 * caller with no timer at all. Sockets are scripted: each fails before its upgrade when told to.
 */

/** A socket whose connect the test fails, as one to a host that is down or refuses the upgrade. */
class ScriptedSocket implements WebSocketLike {
  binaryType = "";
  readyState = 0;
  onopen: WebSocketLike["onopen"] = null;
  onmessage: WebSocketLike["onmessage"] = null;
  onclose: WebSocketLike["onclose"] = null;
  onerror: WebSocketLike["onerror"] = null;

  constructor(private readonly status: number | undefined) {}

  send(): void {}
  close(): void {
    this.onclose?.({ code: 1000, reason: "" });
  }
  upgradeStatus(): Promise<number | undefined> {
    return Promise.resolve(this.status);
  }
  /** The connect failed: nothing listened (no status), or the host answered the upgrade with one. */
  fail(): void {
    this.onclose?.({ code: 1006, reason: "" });
  }
}

function scriptedConnection(status?: number) {
  const sockets: ScriptedSocket[] = [];
  const connection = new Connection({
    url: "ws://127.0.0.1:9/api/remote.mux",
    token: "t",
    socketFactory: () => {
      const socket = new ScriptedSocket(status);
      sockets.push(socket);
      return socket;
    },
    backoff: { baseMs: 1_000, capMs: 8_000 },
    random: () => 0.5,
    keepAlive: false,
  });
  return { connection, sockets };
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe("client reconnect timing", () => {
  it("waits out each backoff delay, drawn from the client's random source, before the next attempt", async () => {
    const { connection, sockets } = scriptedConnection();
    for (const [attempt, delayMs] of [
      [1, 500],
      [2, 1_000],
      [3, 2_000],
    ] as const) {
      sockets.at(-1)!.fail();
      await vi.advanceTimersByTimeAsync(0);
      expect(connection.state).toMatchObject({ name: "backoff", attempt, delayMs });
      await vi.advanceTimersByTimeAsync(delayMs - 1);
      expect(sockets).toHaveLength(attempt);
      await vi.advanceTimersByTimeAsync(1);
      expect(sockets).toHaveLength(attempt + 1);
      expect(connection.state).toMatchObject({ name: "connecting", attempt, socketId: attempt + 1 });
    }
    const closing = connection.close();
    await vi.advanceTimersByTimeAsync(0);
    await closing;
  });

  it("reconnectNow cuts a backoff short, again after the wait it cut would have ended", async () => {
    const { connection, sockets } = scriptedConnection();
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
    sockets[2]!.fail();
    await vi.advanceTimersByTimeAsync(0);
    expect(connection.state).toMatchObject({ name: "backoff", attempt: 3, delayMs: 2_000 });
    await vi.advanceTimersByTimeAsync(1_999);
    expect(sockets).toHaveLength(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(sockets).toHaveLength(4);
    const closing = connection.close();
    await vi.advanceTimersByTimeAsync(0);
    await closing;
  });

  it("a refused connection waits for the caller with no timer pending, however long", async () => {
    const { connection, sockets } = scriptedConnection(401);
    sockets[0]!.fail();
    await vi.advanceTimersByTimeAsync(0);
    expect(connection.state).toEqual({ name: "unauthorized", status: 401 });
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect(sockets).toHaveLength(1);
    await connection.close();
  });
});
