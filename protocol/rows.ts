import { type Static, Type } from "@sinclair/typebox";
import { InteractionKind, TurnState } from "./events.js";

/** `lastState` of a list row (§4): before a turn, during one, or how the newest turn ended. */
export const LastState = Type.Union([
  Type.Literal("idle"),
  Type.Literal("working"),
  Type.Literal("input-required"),
  ...TurnState.anyOf,
]);
export type LastState = Static<typeof LastState>;

export const SessionHeader = Type.Object({
  sessionId: Type.String(),
  title: Type.String(),
  model: Type.String(),
  createdAt: Type.Number(),
  epoch: Type.String(),
  owner: Type.String(),
  forkOf: Type.Optional(Type.Object({ sessionId: Type.String(), seq: Type.Integer() })),
});
export type SessionHeader = Static<typeof SessionHeader>;

/** §4 `Row`: one entry of the session list; `seq` is the log seq it reflects (its watermark). */
export const SessionRow = Type.Object({
  sessionId: Type.String(),
  title: Type.String(),
  createdAt: Type.Number(),
  updatedAt: Type.Number(),
  lastPromptAt: Type.Union([Type.Number(), Type.Null()]),
  turnCount: Type.Integer(),
  blank: Type.Boolean(),
  lastState: LastState,
  live: Type.Boolean(),
  running: Type.Boolean(),
  seq: Type.Integer(),
});
export type SessionRow = Static<typeof SessionRow>;

/** A live agent's status as the control baseline reports it. */
export const LiveAgentState = Type.Union([
  Type.Literal("attached"),
  Type.Literal("running"),
  Type.Literal("idle"),
]);
export type LiveAgentState = Static<typeof LiveAgentState>;

/** Agent status as a control delta reports it; `detached` clears that session's live state. */
export const AgentState = Type.Union([...LiveAgentState.anyOf, Type.Literal("detached")]);
export type AgentState = Static<typeof AgentState>;

export const QueueItem = Type.Object({ itemId: Type.String(), text: Type.String(), queuedAt: Type.Number() });
export type QueueItem = Static<typeof QueueItem>;

export const JobState = Type.Union([
  Type.Literal("running"),
  Type.Literal("completed"),
  Type.Literal("failed"),
  Type.Literal("cancelled"),
  /** The host stopped or crashed while the job ran. */
  Type.Literal("interrupted"),
]);
export type JobState = Static<typeof JobState>;
export const Job = Type.Object({
  jobId: Type.String(),
  label: Type.String(),
  /** 0..1 */
  progress: Type.Number({ minimum: 0, maximum: 1 }),
  state: JobState,
});
export type Job = Static<typeof Job>;

export const Interaction = Type.Object({
  interactionId: Type.String(),
  sessionId: Type.String(),
  turnId: Type.String(),
  kind: InteractionKind,
  requestedAt: Type.Number(),
  action: Type.Optional(Type.String()),
  question: Type.Optional(Type.String()),
  options: Type.Optional(Type.Array(Type.String())),
  /** The tool call an approval is about, so a tool-loop agent can map the answer back to it. */
  toolCallId: Type.Optional(Type.String()),
});
export type Interaction = Static<typeof Interaction>;
