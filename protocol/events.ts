import { type Static, type TSchema, Type } from "@sinclair/typebox";

/** §5: the event types of v1 and their `data` shapes. */

export const TurnState = Type.Union([
  Type.Literal("completed"),
  Type.Literal("failed"),
  Type.Literal("cancelled"),
  Type.Literal("interrupted"),
]);
export type TurnEndState = Static<typeof TurnState>;

export const AttachmentShell = Type.Object({
  name: Type.String(),
  type: Type.String(),
  size: Type.Integer({ minimum: 0 }),
  attachmentId: Type.Optional(Type.String()),
  url: Type.Optional(Type.String()),
  omittedBytes: Type.Optional(Type.Integer({ minimum: 0 })),
});
export type AttachmentShell = Static<typeof AttachmentShell>;

/**
 * The metadata a prompt may carry (`session.prompt` `meta`) and its stored `user/message` keeps:
 * only what a transcript reads back. `origin` names who sent the prompt on a person's behalf (a
 * scheduler, a resume after an answer); a person's own typed prompt carries none. The voice keys
 * say the text was dictated: `voiceInput`, the recording's `voiceDurationMs`, and the BCP 47 tag
 * of the recognised speech, `voiceLanguage`.
 */
export const UserMessageMeta = Type.Object(
  {
    incognito: Type.Optional(Type.Boolean()),
    hidden: Type.Optional(Type.Boolean()),
    hitlResume: Type.Optional(Type.Boolean()),
    origin: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    voiceInput: Type.Optional(Type.Boolean()),
    voiceDurationMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400_000 })),
    voiceLanguage: Type.Optional(Type.String({ minLength: 1, maxLength: 35 })),
  },
  { additionalProperties: false },
);
export type UserMessageMeta = Static<typeof UserMessageMeta>;

export const MessageSource = Type.Union([Type.Literal("user"), Type.Literal("server")]);
export type MessageSource = Static<typeof MessageSource>;

export const InteractionKind = Type.Union([Type.Literal("approval"), Type.Literal("question")]);
export type InteractionKind = Static<typeof InteractionKind>;

export const Resolution = Type.Union([
  Type.Object(
    { outcome: Type.Union([Type.Literal("approve"), Type.Literal("deny")]) },
    { additionalProperties: false },
  ),
  Type.Object({ answer: Type.String({ maxLength: 16_000 }) }, { additionalProperties: false }),
]);
export type Resolution = Static<typeof Resolution>;

export const TurnTrigger = Type.Union([
  Type.Literal("prompt"),
  Type.Literal("queue"),
  Type.Literal("server"),
]);
export type TurnTrigger = Static<typeof TurnTrigger>;

export const EventData = {
  "session/created": Type.Object({
    title: Type.Optional(Type.String()),
    model: Type.Optional(Type.String()),
    origin: Type.Optional(Type.String()),
    forkOf: Type.Optional(Type.Object({ sessionId: Type.String(), seq: Type.Integer({ minimum: 0 }) })),
  }),
  "session/renamed": Type.Object({ title: Type.String() }),
  "session/model": Type.Object({ model: Type.String() }),
  "turn/start": Type.Object({ turnId: Type.String(), trigger: TurnTrigger }),
  "user/message": Type.Object({
    messageId: Type.String(),
    source: MessageSource,
    text: Type.String(),
    display: Type.Optional(Type.String()),
    hidden: Type.Optional(Type.Boolean()),
    interjection: Type.Optional(Type.Boolean()),
    attachments: Type.Array(AttachmentShell),
    meta: UserMessageMeta,
  }),
  "assistant/delta": Type.Object({ turnId: Type.String(), text: Type.String() }),
  "reasoning/delta": Type.Object({ turnId: Type.String(), text: Type.String() }),
  "tool/call": Type.Object({
    turnId: Type.String(),
    toolCallId: Type.String(),
    name: Type.String(),
    args: Type.Unknown(),
  }),
  "tool/result": Type.Object({
    turnId: Type.String(),
    toolCallId: Type.String(),
    ok: Type.Boolean(),
    result: Type.Unknown(),
    durationMs: Type.Number({ minimum: 0 }),
  }),
  "interaction/requested": Type.Object({
    turnId: Type.String(),
    interactionId: Type.String(),
    kind: InteractionKind,
    action: Type.Optional(Type.String()),
    question: Type.Optional(Type.String()),
    options: Type.Optional(Type.Array(Type.String())),
    toolCallId: Type.Optional(Type.String()),
  }),
  "interaction/resolved": Type.Object({ interactionId: Type.String(), resolution: Resolution }),
  /**
   * `byFork`: a fork ended it, `interrupted`, in its own log: the turn runs on in the source only.
   * `code`: the §7 error code of a queued prompt that could not start (its turn ends `failed` at once).
   */
  "turn/end": Type.Object({
    turnId: Type.String(),
    state: TurnState,
    error: Type.Optional(Type.String()),
    code: Type.Optional(Type.String()),
    byFork: Type.Optional(Type.Literal(true)),
  }),
  /** A background job began (it may outlive its turn). */
  "job/started": Type.Object({ jobId: Type.String(), label: Type.String(), turnId: Type.String() }),
  /**
   * A job ended; `interrupted` when its host stopped or crashed while it ran, or, with `byFork`,
   * when a fork copied it running (it runs on in the source only).
   */
  "job/ended": Type.Object({
    jobId: Type.String(),
    state: TurnState,
    byFork: Type.Optional(Type.Literal(true)),
  }),
} as const satisfies Record<string, TSchema>;

export type EventType = keyof typeof EventData;
export const EVENT_TYPES = Object.keys(EventData) as EventType[];
export type EventDataOf<T extends EventType> = Static<(typeof EventData)[T]>;

/** An event not yet stored: what an agent or the controller asks the log to append. */
export type NewEvent = { [T in EventType]: { type: T; data: EventDataOf<T> } }[EventType];

/** A committed event (§5): `at` in epoch milliseconds, `seq` contiguous from 1 per epoch. */
export type SessionEvent = {
  [T in EventType]: { seq: number; at: number; type: T; data: EventDataOf<T> };
}[EventType];

export const SessionEventSchema = Type.Object({
  seq: Type.Integer({ minimum: 1 }),
  at: Type.Number(),
  type: Type.String(),
  data: Type.Unknown(),
});
