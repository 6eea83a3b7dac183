import { describe, expect, it } from "vitest";
import type { HelloFrame } from "../../protocol/index.js";
import {
  type ConnectionEvent,
  type ConnectionState,
  INITIAL_STATE,
  isTerminal,
  type TransitionContext,
  transition,
} from "../../src/client/connection-state.js";

const hello: HelloFrame = { type: "hello", protocol: 1, hostId: "h", generation: "g1", serverTime: 0 };
const ctx: TransitionContext = { now: 1_000, random: () => 0.5, policy: { baseMs: 250, capMs: 10_000 } };

const connecting = (attempt: number, socketId: number): ConnectionState => ({
  name: "connecting",
  attempt,
  socketId,
});
const open = (socketId: number): ConnectionState => ({ name: "open", socketId, hello });
const backoff = (attempt: number, delayMs: number, status?: number): ConnectionState => ({
  name: "backoff",
  attempt,
  delayMs,
  nextAttemptAt: ctx.now + delayMs,
  ...(status === undefined ? {} : { status }),
});
const closed: ConnectionState = { name: "closed" };
const unauthorized = (status: 401 | 403): ConnectionState => ({ name: "unauthorized", status });
const rejected = (status: number): ConnectionState => ({ name: "rejected", status });
const incompatible = (protocol: number): ConnectionState => ({ name: "incompatible", protocol });

const cases: [string, ConnectionState, ConnectionEvent, ConnectionState][] = [
  ["first hello opens", connecting(0, 1), { type: "hello", socketId: 1, hello }, open(1)],
  [
    "failed first connect backs off 0.5·250",
    connecting(0, 1),
    { type: "lost", socketId: 1 },
    backoff(1, 125),
  ],
  [
    "third failed connect backs off 0.5·1000",
    connecting(2, 3),
    { type: "lost", socketId: 3 },
    backoff(3, 500),
  ],
  [
    "hello after retries opens (attempt reset)",
    connecting(5, 6),
    { type: "hello", socketId: 6, hello },
    open(6),
  ],
  ["lost open socket backs off from attempt 0", open(4), { type: "lost", socketId: 4 }, backoff(1, 125)],
  [
    "a retry after a 429 connects, the status left behind",
    backoff(2, 250, 429),
    { type: "retry", socketId: 3 },
    connecting(2, 3),
  ],
  [
    "retry connects with the new socket id",
    backoff(2, 250),
    { type: "retry", socketId: 9 },
    connecting(2, 9),
  ],
  ["superseded socket's lost is ignored", open(4), { type: "lost", socketId: 3 }, open(4)],
  [
    "superseded socket's hello is ignored",
    connecting(1, 5),
    { type: "hello", socketId: 4, hello },
    connecting(1, 5),
  ],
  [
    "superseded socket's lost while connecting is ignored",
    connecting(1, 5),
    { type: "lost", socketId: 4 },
    connecting(1, 5),
  ],
  [
    "hello while backing off is ignored",
    backoff(1, 100),
    { type: "hello", socketId: 2, hello },
    backoff(1, 100),
  ],
  ["retry while open is ignored", open(2), { type: "retry", socketId: 3 }, open(2)],
  ["close from connecting", connecting(0, 1), { type: "close" }, closed],
  ["close from open", open(1), { type: "close" }, closed],
  ["close from backoff", backoff(1, 100), { type: "close" }, closed],
  ["closed absorbs hello", closed, { type: "hello", socketId: 1, hello }, closed],
  ["closed absorbs lost", closed, { type: "lost", socketId: 1 }, closed],
  ["closed absorbs retry", closed, { type: "retry", socketId: 2 }, closed],
  [
    "a refused token is unauthorized",
    connecting(3, 4),
    { type: "refused", socketId: 4, status: 401 },
    unauthorized(401),
  ],
  [
    "a refused origin is unauthorized",
    connecting(0, 1),
    { type: "refused", socketId: 1, status: 403 },
    unauthorized(403),
  ],
  [
    "a wrong path is rejected",
    connecting(0, 1),
    { type: "refused", socketId: 1, status: 404 },
    rejected(404),
  ],
  [
    "a refused subprotocol is rejected",
    connecting(0, 1),
    { type: "refused", socketId: 1, status: 400 },
    rejected(400),
  ],
  [
    "a 503 at upgrade backs off, naming it",
    connecting(0, 1),
    { type: "refused", socketId: 1, status: 503 },
    backoff(1, 125, 503),
  ],
  [
    "a 429 at upgrade backs off, naming it",
    connecting(1, 2),
    { type: "refused", socketId: 2, status: 429 },
    backoff(2, 250, 429),
  ],
  // passing trouble: a timeout, the host failing or restarting, a proxy redirecting mid-deploy
  [
    "a 408 at upgrade backs off",
    connecting(0, 1),
    { type: "refused", socketId: 1, status: 408 },
    backoff(1, 125, 408),
  ],
  [
    "a 500 at upgrade backs off",
    connecting(0, 1),
    { type: "refused", socketId: 1, status: 500 },
    backoff(1, 125, 500),
  ],
  [
    "a 302 at upgrade backs off",
    connecting(0, 1),
    { type: "refused", socketId: 1, status: 302 },
    backoff(1, 125, 302),
  ],
  [
    "a 499 at upgrade is rejected",
    connecting(0, 1),
    { type: "refused", socketId: 1, status: 499 },
    rejected(499),
  ],
  [
    "a superseded socket's refusal is ignored",
    connecting(0, 2),
    { type: "refused", socketId: 1, status: 401 },
    connecting(0, 2),
  ],
  [
    "unauthorized waits: lost is ignored",
    unauthorized(401),
    { type: "lost", socketId: 1 },
    unauthorized(401),
  ],
  [
    "unauthorized waits: retry is ignored",
    unauthorized(401),
    { type: "retry", socketId: 2 },
    unauthorized(401),
  ],
  [
    "a new token reconnects from attempt 0",
    unauthorized(401),
    { type: "reconnect", socketId: 7 },
    connecting(0, 7),
  ],
  ["rejected reconnects on request", rejected(404), { type: "reconnect", socketId: 3 }, connecting(0, 3)],
  ["close from unauthorized", unauthorized(403), { type: "close" }, closed],
  ["close from rejected", rejected(404), { type: "close" }, closed],
  ["reconnect while open is ignored", open(2), { type: "reconnect", socketId: 3 }, open(2)],
  ["closed absorbs reconnect", closed, { type: "reconnect", socketId: 3 }, closed],
  [
    "a hello of another protocol version is incompatible, whatever the attempt",
    connecting(4, 5),
    { type: "incompatible", socketId: 5, protocol: 2 },
    incompatible(2),
  ],
  [
    "a superseded socket's other version is ignored",
    connecting(0, 2),
    { type: "incompatible", socketId: 1, protocol: 2 },
    connecting(0, 2),
  ],
  ["incompatible waits: lost is ignored", incompatible(2), { type: "lost", socketId: 1 }, incompatible(2)],
  ["incompatible waits: retry is ignored", incompatible(2), { type: "retry", socketId: 2 }, incompatible(2)],
  [
    "incompatible reconnects on request",
    incompatible(2),
    { type: "reconnect", socketId: 3 },
    connecting(0, 3),
  ],
  ["close from incompatible", incompatible(0), { type: "close" }, closed],
  [
    "an open socket ignores another version",
    open(2),
    { type: "incompatible", socketId: 2, protocol: 2 },
    open(2),
  ],
];

describe("connection state machine", () => {
  it("starts connecting with socket 1 and attempt 0", () => {
    expect(INITIAL_STATE).toEqual(connecting(0, 1));
  });

  it.each(cases)("%s", (_name, from, event, to) => {
    expect(transition(from, event, ctx)).toEqual(to);
  });

  it("waits for the caller only when refused, incompatible or closed", () => {
    const waiting = [unauthorized(401), unauthorized(403), rejected(404), incompatible(2), closed];
    const moving = [connecting(0, 1), open(1), backoff(1, 125), backoff(1, 125, 429)];
    expect(waiting.map(isTerminal)).toEqual(waiting.map(() => true));
    expect(moving.map(isTerminal)).toEqual(moving.map(() => false));
  });

  it("caps the backoff delay at 10 s after many failures", () => {
    const next = transition(
      connecting(40, 41),
      { type: "lost", socketId: 41 },
      { ...ctx, random: () => 0.999 },
    );
    expect(next.name).toBe("backoff");
    if (next.name === "backoff") {
      expect(next.delayMs).toBeCloseTo(9990, 5);
      expect(next.nextAttemptAt).toBe(ctx.now + next.delayMs);
    }
  });
});
