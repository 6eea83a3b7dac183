import type { HelloFrame } from "../../protocol/index.js";
import { type BackoffPolicy, backoffDelay } from "./backoff.js";

/**
 * The client's connection as a closed set of named states (style.md take 7).
 * `attempt` counts consecutive failed connects; it resets when a `hello` arrives.
 */
export type ConnectionState =
  | { readonly name: "connecting"; readonly attempt: number; readonly socketId: number }
  | { readonly name: "open"; readonly socketId: number; readonly hello: HelloFrame }
  | {
      readonly name: "backoff";
      readonly attempt: number;
      readonly nextAttemptAt: number;
      readonly delayMs: number;
    }
  | { readonly name: "closed" };

export type ConnectionStateName = ConnectionState["name"];

/** What can happen to a connection. `socketId` tags events from one physical socket. */
export type ConnectionEvent =
  | { readonly type: "hello"; readonly socketId: number; readonly hello: HelloFrame }
  | { readonly type: "lost"; readonly socketId: number }
  | { readonly type: "retry"; readonly socketId: number }
  | { readonly type: "close" };

/** The inputs of a transition that are not state: the clock, the random source and the policy. */
export interface TransitionContext {
  readonly now: number;
  readonly random: () => number;
  readonly policy: BackoffPolicy;
}

export const INITIAL_STATE: ConnectionState = { name: "connecting", attempt: 0, socketId: 1 };

type Handler<S extends ConnectionState["name"], E extends ConnectionEvent["type"]> = (
  state: Extract<ConnectionState, { name: S }>,
  event: Extract<ConnectionEvent, { type: E }>,
  ctx: TransitionContext,
) => ConnectionState;

type Table = {
  [S in ConnectionStateName]: { [E in ConnectionEvent["type"]]?: Handler<S, E> };
};

const toBackoff = (attempt: number, ctx: TransitionContext): ConnectionState => {
  const delayMs = backoffDelay(attempt, ctx.policy, ctx.random);
  return { name: "backoff", attempt: attempt + 1, delayMs, nextAttemptAt: ctx.now + delayMs };
};

const closed: ConnectionState = { name: "closed" };

/**
 * Every legal transition. A missing entry means the event is ignored in that state, which is how
 * events from a superseded socket (a different `socketId`) fall away.
 */
const TABLE: Table = {
  connecting: {
    hello: (s, e) => (e.socketId === s.socketId ? { name: "open", socketId: s.socketId, hello: e.hello } : s),
    lost: (s, e, ctx) => (e.socketId === s.socketId ? toBackoff(s.attempt, ctx) : s),
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
