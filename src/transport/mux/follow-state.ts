/**
 * States of one `session.follow` stream (protocol-v1 §5) and its one transition table.
 *
 * - `opening`: the session being opened (tried again while the store fails it retryably), then
 *   the commit listener installed and the cursor checked; notices are buffered.
 * - `replaying`: the missing suffix is read from the log in pages; notices are buffered.
 * - `live`: commits are pushed as they happen.
 * - `paused`: the socket is above its high-water mark; notices are dropped, the last sent seq
 *   is remembered, and the log serves the follower once the socket drains.
 * - `catchingUp`: served from the log after a pause, a gap or a clear; notices are buffered.
 * - `ended`: `end` or `error` was sent, or the socket is gone.
 */
export type FollowState = "opening" | "replaying" | "live" | "paused" | "catchingUp" | "ended";

export type FollowTrigger =
  /** The cursor was accepted. */
  | "opened"
  /** The log read reached the head and the buffered commits continued it. */
  | "reachedHead"
  /** The socket's backlog is above the high-water mark. */
  | "highWater"
  /** The socket drained. */
  | "drained"
  /** A live commit did not continue the last sent seq (a clear, an epoch change, a gap). */
  | "gap"
  /** Closed by the client, failed, or the socket is gone. */
  | "finish";

const TRANSITIONS: Readonly<Record<FollowState, Partial<Record<FollowTrigger, FollowState>>>> = {
  opening: { opened: "replaying", finish: "ended" },
  replaying: { reachedHead: "live", highWater: "paused", finish: "ended" },
  live: { highWater: "paused", gap: "catchingUp", finish: "ended" },
  paused: { drained: "catchingUp", finish: "ended" },
  catchingUp: { reachedHead: "live", highWater: "paused", finish: "ended" },
  ended: {},
};

/** The next state, or `undefined` when the trigger does not apply in `state`. */
export function nextFollowState(state: FollowState, trigger: FollowTrigger): FollowState | undefined {
  return TRANSITIONS[state][trigger];
}

/** States in which commit notices are kept until the current log read completes. */
export function buffersNotices(state: FollowState): boolean {
  return state === "opening" || state === "replaying" || state === "catchingUp";
}
