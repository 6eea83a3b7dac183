import type { HelloFrame } from "../../protocol/index.js";
import { type BackoffPolicy, backoffDelay } from "./backoff.js";

/**
 * The client's connection as a closed set of named states (style.md take 7).
 * `attempt` counts consecutive failed connects; it resets when a `hello` arrives.
 * `unauthorized` (HTTP 401/403 at upgrade), `rejected` (any other 4xx, e.g. 404 for a wrong
 * path) and `incompatible` (the host's `hello` names another protocol version) are terminal: no
 * retry loop; `reconnectNow` leaves them, `setToken` leaves `unauthorized`. A refusal that passes
 * (429 too many sockets, 503 overloaded, a proxy's 502) is a `backoff` that names its status:
 * retried all the same, since sockets free up and load passes.
 */
export type ConnectionState =
  | { readonly name: "connecting"; readonly attempt: number; readonly socketId: number }
  | { readonly name: "open"; readonly socketId: number; readonly hello: HelloFrame }
  | {
      readonly name: "backoff";
      readonly attempt: number;
      readonly nextAttemptAt: number;
      readonly delayMs: number;
      /**
       * The HTTP status the last attempt was refused with, if one was learnt. 429: the principal
       * holds its most sockets (§2), and calls waiting for a socket fail `too_many_connections`.
       */
      readonly status?: number;
    }
  | { readonly name: "unauthorized"; readonly status: 401 | 403 }
  | { readonly name: "rejected"; readonly status: number }
  /** `protocol`: the version the host's `hello` names. */
  | { readonly name: "incompatible"; readonly protocol: number }
  | { readonly name: "closed" };

export type ConnectionStateName = ConnectionState["name"];

/** What can happen to a connection. `socketId` tags events from one physical socket. */
export type ConnectionEvent =
  | { readonly type: "hello"; readonly socketId: number; readonly hello: HelloFrame }
  | { readonly type: "lost"; readonly socketId: number }
  | { readonly type: "retry"; readonly socketId: number }
  /**
   * The host answered the upgrade with an HTTP status instead of switching protocols, or closed
   * the socket before its `hello` with 4000 + that status (§2).
   */
  | { readonly type: "refused"; readonly socketId: number; readonly status: number }
  /** The host's `hello` names a protocol version other than the client's. */
  | { readonly type: "incompatible"; readonly socketId: number; readonly protocol: number }
  /** Leave a terminal state (a new token, or the caller asked to try again). */
  | { readonly type: "reconnect"; readonly socketId: number }
  | { readonly type: "close" };

/** The inputs of a transition that are not state: the clock, the random source and the policy. */
export interface TransitionContext {
  readonly now: number;
  readonly random: () => number;
  readonly policy: BackoffPolicy;
}

/** The id of the first socket; every retry or reconnect takes the next one. */
export const INITIAL_SOCKET_ID = 1;
/** A client starts connecting with its first socket. */
export const INITIAL_STATE: ConnectionState = { name: "connecting", attempt: 0, socketId: INITIAL_SOCKET_ID };

type Handler<S extends ConnectionState["name"], E extends ConnectionEvent["type"]> = (
  state: Extract<ConnectionState, { name: S }>,
  event: Extract<ConnectionEvent, { type: E }>,
  ctx: TransitionContext,
) => ConnectionState;

type Table = {
  [S in ConnectionStateName]: { [E in ConnectionEvent["type"]]?: Handler<S, E> };
};

const toBackoff = (
  attempt: number,
  ctx: TransitionContext,
): Extract<ConnectionState, { name: "backoff" }> => {
  const delayMs = backoffDelay(attempt, ctx.policy, ctx.random);
  return { name: "backoff", attempt: attempt + 1, delayMs, nextAttemptAt: ctx.now + delayMs };
};

const closed: ConnectionState = { name: "closed" };

/**
 * Where a refused upgrade leads: a refused token or origin is `unauthorized`, another client error
 * (404 wrong path, 400 bad subprotocol) is `rejected`; 408, 429 and 5xx are passing, so back off.
 */
const refusal = (attempt: number, status: number, ctx: TransitionContext): ConnectionState => {
  if (status === 401 || status === 403) return { name: "unauthorized", status };
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) return { name: "rejected", status };
  return { ...toBackoff(attempt, ctx), status };
};
const restart = (_s: ConnectionState, e: { socketId: number }): ConnectionState => ({
  name: "connecting",
  attempt: 0,
  socketId: e.socketId,
});

/** Whether a state ends the reconnect loop until the caller acts (`setToken`, `reconnectNow`). */
export function isTerminal(state: ConnectionState): boolean {
  return (
    state.name === "unauthorized" ||
    state.name === "rejected" ||
    state.name === "incompatible" ||
    state.name === "closed"
  );
}

/**
 * Every legal transition. A missing entry means the event is ignored in that state, which is how
 * events from a superseded socket (a different `socketId`) fall away.
 */
const TABLE: Table = {
  connecting: {
    hello: (s, e) => (e.socketId === s.socketId ? { name: "open", socketId: s.socketId, hello: e.hello } : s),
    lost: (s, e, ctx) => (e.socketId === s.socketId ? toBackoff(s.attempt, ctx) : s),
    refused: (s, e, ctx) => (e.socketId === s.socketId ? refusal(s.attempt, e.status, ctx) : s),
    // retrying cannot help: the host will greet the next socket the same way
    incompatible: (s, e) => (e.socketId === s.socketId ? { name: "incompatible", protocol: e.protocol } : s),
    close: () => closed,
  },
  open: {
    // A lost socket after a successful hello starts counting from zero again.
    lost: (s, e, ctx) => (e.socketId === s.socketId ? toBackoff(0, ctx) : s),
    close: () => closed,
  },
  backoff: {
    retry: (s, e) => ({ name: "connecting", attempt: s.attempt, socketId: e.socketId }),
    close: () => closed,
  },
  unauthorized: { reconnect: restart, close: () => closed },
  rejected: { reconnect: restart, close: () => closed },
  incompatible: { reconnect: restart, close: () => closed },
  closed: {},
};

/** The one transition function: pure, table-driven, total (unknown pairs return the state unchanged). */
export function transition(
  state: ConnectionState,
  event: ConnectionEvent,
  ctx: TransitionContext,
): ConnectionState {
  const row = TABLE[state.name] as Record<
    string,
    Handler<ConnectionStateName, ConnectionEvent["type"]> | undefined
  >;
  const handler = row[event.type];
  return handler ? handler(state as never, event as never, ctx) : state;
}
