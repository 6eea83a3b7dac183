import { type Static, Type } from "@sinclair/typebox";
import { SessionRow } from "./rows.js";

/** §3 frame ids: positive safe integers chosen by the client. */
export const FrameId = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });

export const CallFrame = Type.Object({
  type: Type.Literal("call"),
  id: FrameId,
  method: Type.String({ maxLength: 128 }),
  params: Type.Optional(Type.Unknown()),
});
export const OpenFrame = Type.Object({
  type: Type.Literal("open"),
  id: FrameId,
  method: Type.String({ maxLength: 128 }),
  params: Type.Optional(Type.Unknown()),
});
export const CloseFrame = Type.Object({ type: Type.Literal("close"), id: FrameId });
export const ClientFrame = Type.Union([CallFrame, OpenFrame, CloseFrame]);
export type ClientFrame = Static<typeof ClientFrame>;

export const WireErrorSchema = Type.Object({
  code: Type.String(),
  message: Type.String(),
  category: Type.Union([Type.Literal("protocol"), Type.Literal("business"), Type.Literal("internal")]),
  retryable: Type.Boolean(),
  data: Type.Optional(Type.Unknown()),
});

/** §6 notifications. */
export const Notifications = {
  "session.added": Type.Object({ row: SessionRow }),
  "session.removed": Type.Object({ sessionId: Type.String() }),
  "session.updated": Type.Object({ row: SessionRow }),
  /** To the principal who dismissed or restored it, on every socket of theirs. */
  "session.dismissed": Type.Object({ sessionId: Type.String(), dismissed: Type.Boolean(), row: SessionRow }),
  "agent.error": Type.Object({ sessionId: Type.String(), message: Type.String() }),
} as const;
export type NotificationName = keyof typeof Notifications;
export type NotificationValue<N extends NotificationName> = Static<(typeof Notifications)[N]>;
export type Notification = {
  [N in NotificationName]: { name: N; value: NotificationValue<N> };
}[NotificationName];

export const HostFrame = Type.Union([
  Type.Object({
    type: Type.Literal("hello"),
    protocol: Type.Literal(1),
    hostId: Type.String(),
    generation: Type.String(),
    serverTime: Type.Number(),
    /** The largest client frame the host reads, in bytes: a larger one closes the socket (1009). */
    maxPayloadBytes: Type.Optional(Type.Integer({ minimum: 1 })),
    /** The longest string, in UTF-8 bytes, the host reads in a client frame: a longer one is `bad_frame`. */
    maxStrBytes: Type.Optional(Type.Integer({ minimum: 1 })),
  }),
  Type.Object({ type: Type.Literal("result"), id: FrameId, value: Type.Unknown() }),
  Type.Object({ type: Type.Literal("item"), id: FrameId, value: Type.Unknown() }),
  Type.Object({ type: Type.Literal("end"), id: FrameId }),
  Type.Object({ type: Type.Literal("error"), id: Type.Optional(FrameId), error: WireErrorSchema }),
  Type.Object({ type: Type.Literal("event"), name: Type.String(), value: Type.Unknown() }),
]);
export type HostFrame = Static<typeof HostFrame>;
export type HelloFrame = Extract<HostFrame, { type: "hello" }>;
