import { type Static, type TSchema, Type } from "@sinclair/typebox";
import {
  type AttachmentShell,
  Resolution,
  type SessionEvent,
  SessionEventSchema,
  UserMessageMeta,
} from "./events.js";
import { OpaqueIdSchema, SessionIdSchema } from "./ids.js";
import { promptContentViolation } from "./prompt-content.js";
import {
  AgentState,
  Interaction,
  Job,
  LiveAgentState,
  QueueItem,
  SessionHeader,
  SessionRow,
} from "./rows.js";
import { type CrossFieldRule, type Validator, validator } from "./validate.js";
import { VisibleText } from "./visible-text-schema.js";

/**
 * §4 activation rules. `cold`: reads or writes persistence, never starts an agent.
 * `live-only`: acts on a live agent or pending item only, else `agent_not_live`.
 * `resume`: may start or resume the session's agent because the command asks for work.
 * `explicit`: never starts an agent, but stops a live one (delete).
 */
export type Activation = "cold" | "live-only" | "resume" | "explicit";

const strict = { additionalProperties: false } as const;
const Empty = Type.Object({}, strict);
const Limit = (max: number) => Type.Integer({ minimum: 1, maximum: max });

export const AttachmentInput = Type.Object(
  {
    name: VisibleText({ maxLength: 256 }),
    type: Type.String({ maxLength: 256 }),
    attachmentId: Type.Optional(OpaqueIdSchema),
    url: Type.Optional(Type.String({ maxLength: 4096 })),
    bytes: Type.Optional(Type.Uint8Array({ maxByteLength: 512 * 1024 })),
  },
  strict,
);
export type AttachmentInput = Static<typeof AttachmentInput>;

export const QueueOp = Type.Union([
  Type.Object({ remove: Type.Literal(true), itemId: OpaqueIdSchema }, strict),
  Type.Object(
    { edit: Type.Literal(true), itemId: OpaqueIdSchema, text: VisibleText({ maxLength: 16_000 }) },
    strict,
  ),
  Type.Object({ steer: Type.Literal(true), itemId: OpaqueIdSchema }, strict),
  Type.Object({ clear: Type.Literal(true) }, strict),
]);
export type QueueOp = Static<typeof QueueOp>;

/**
 * An answer as a caller gives it (`session.respond`, `POST /v1/interactions/{id}/answer`): the
 * stored `Resolution`, with a question's answer holding a visible character.
 */
export const ResponseInput = Type.Union([
  Type.Object({ outcome: Type.Union([Type.Literal("approve"), Type.Literal("deny")]) }, strict),
  Type.Object({ answer: VisibleText({ maxLength: 16_000 }) }, strict),
]);

/**
 * A prompt's `meta` as a caller gives it: the stored `UserMessageMeta`, whose names (`origin`,
 * `voiceLanguage`) a reader is shown, so each holds a visible character.
 */
export const PromptMeta = Type.Object(
  {
    ...UserMessageMeta.properties,
    origin: Type.Optional(VisibleText({ maxLength: 64 })),
    voiceLanguage: Type.Optional(VisibleText({ maxLength: 35 })),
  },
  strict,
);

const PageResult = Type.Object({
  header: SessionHeader,
  epoch: Type.String(),
  headSeq: Type.Integer(),
  events: Type.Array(SessionEventSchema),
  hasMore: Type.Boolean(),
  projection: SessionRow,
});

interface MethodSpec {
  readonly kind: "call" | "stream";
  readonly activation: Activation;
  readonly params: TSchema;
  /** For calls: the `result` value. For streams: one `item` value. */
  readonly value: TSchema;
}

const call = <P extends TSchema, V extends TSchema>(activation: Activation, params: P, value: V) =>
  ({ kind: "call", activation, params, value }) as const;
const stream = <P extends TSchema, V extends TSchema>(activation: Activation, params: P, value: V) =>
  ({ kind: "stream", activation, params, value }) as const;

/** Follow items, §5. */
export const FollowItem = Type.Union([
  Type.Object({ kind: Type.Literal("opened"), epoch: Type.String(), headSeq: Type.Integer() }),
  Type.Object({ kind: Type.Literal("reset"), epoch: Type.String() }),
  Type.Object({ kind: Type.Literal("events"), events: Type.Array(SessionEventSchema) }),
  Type.Object({ kind: Type.Literal("caughtUp"), seq: Type.Integer() }),
]);
export type FollowItem = Static<typeof FollowItem>;

/**
 * Download items, §5 `session.download`: the attachment's `head` first, then its bytes in order,
 * each piece at the offset it starts at.
 */
export const DownloadItem = Type.Union([
  Type.Object({ kind: Type.Literal("head"), name: Type.String(), type: Type.String(), size: Type.Integer() }),
  Type.Object({ kind: Type.Literal("bytes"), offset: Type.Integer(), bytes: Type.Uint8Array() }),
]);
export type DownloadItem = Static<typeof DownloadItem>;

export const AgentStatus = Type.Object({
  sessionId: Type.String(),
  state: LiveAgentState,
  /** Hosts sharing one store: the host the agent runs on. */
  hostId: Type.Optional(Type.String()),
});
export const SessionQueue = Type.Object({ sessionId: Type.String(), items: Type.Array(QueueItem) });
export const SessionJobs = Type.Object({ sessionId: Type.String(), jobs: Type.Array(Job) });

/** Control items, §5. */
export const ControlItem = Type.Union([
  Type.Object({
    kind: Type.Literal("baseline"),
    generation: Type.String(),
    agents: Type.Array(AgentStatus),
    queues: Type.Array(SessionQueue),
    jobs: Type.Array(SessionJobs),
    interactions: Type.Array(Interaction),
    projections: Type.Array(SessionRow),
    /**
     * A part of a baseline asked for in parts (`baselineParts`), not the last: the baseline is
     * every part's entries in order, applied at the part without it.
     */
    more: Type.Optional(Type.Literal(true)),
  }),
  Type.Object({
    kind: Type.Literal("agent"),
    sessionId: Type.String(),
    state: AgentState,
    /** Hosts sharing one store: the host the agent runs on (absent on `detached`). */
    hostId: Type.Optional(Type.String()),
  }),
  Type.Object({ kind: Type.Literal("queue"), sessionId: Type.String(), items: Type.Array(QueueItem) }),
  Type.Object({ kind: Type.Literal("jobs"), sessionId: Type.String(), jobs: Type.Array(Job) }),
  Type.Object({ kind: Type.Literal("interaction.requested"), interaction: Interaction }),
  Type.Object({
    kind: Type.Literal("interaction.resolved"),
    interactionId: Type.String(),
    resolution: Resolution,
  }),
  /** The turn that asked ended without an answer (cancelled, failed); drop it from the mirror. */
  Type.Object({ kind: Type.Literal("interaction.withdrawn"), interactionId: Type.String() }),
  Type.Object({ kind: Type.Literal("projection"), sessionId: Type.String(), projection: SessionRow }),
]);
export type ControlItem = Static<typeof ControlItem>;

/** The method table: one place the host, the SDK and the tests read. */
export const Methods = {
  "session.list": call(
    "cold",
    Type.Object(
      {
        limit: Type.Optional(Limit(200)),
        parked: Type.Optional(Type.Boolean()),
        before: Type.Optional(Type.String({ maxLength: 512 })),
        /** `true`: only the sessions the caller dismissed; otherwise those are left out. */
        dismissed: Type.Optional(Type.Boolean()),
      },
      strict,
    ),
    Type.Object({ sessions: Type.Array(SessionRow), next: Type.Optional(Type.String()) }),
  ),
  "session.page": call(
    "cold",
    Type.Object(
      {
        sessionId: SessionIdSchema,
        beforeSeq: Type.Optional(Type.Integer({ minimum: 1 })),
        afterSeq: Type.Optional(Type.Integer({ minimum: 0 })),
        limit: Type.Optional(Limit(1000)),
      },
      strict,
    ),
    PageResult,
  ),
  "session.search": call(
    "cold",
    Type.Object({ query: VisibleText({ maxLength: 512 }), limit: Type.Optional(Limit(200)) }, strict),
    Type.Object({
      hits: Type.Array(
        Type.Object({ sessionId: Type.String(), seq: Type.Integer(), snippet: Type.String() }),
      ),
    }),
  ),
  "session.models": call(
    "cold",
    Empty,
    Type.Object({
      models: Type.Array(Type.Object({ id: Type.String(), label: Type.String() })),
      default: Type.String(),
    }),
  ),
  "session.attachment": call(
    "cold",
    Type.Object({ sessionId: SessionIdSchema, attachmentId: OpaqueIdSchema }, strict),
    Type.Object({ name: Type.String(), type: Type.String(), size: Type.Integer(), bytes: Type.Uint8Array() }),
  ),
  "session.create": call(
    "resume",
    Type.Object(
      {
        sessionId: Type.Optional(SessionIdSchema),
        title: Type.Optional(VisibleText({ maxLength: 512 })),
        model: Type.Optional(Type.String({ maxLength: 256 })),
        /** Where the session was started (`"web"`, `"cli"`); the session view's `origin`. */
        origin: Type.Optional(VisibleText({ maxLength: 64 })),
      },
      strict,
    ),
    Type.Object({ header: SessionHeader }),
  ),
  "session.fork": call(
    "resume",
    Type.Object(
      {
        sourceId: SessionIdSchema,
        atSeq: Type.Optional(Type.Integer({ minimum: 0 })),
        sessionId: Type.Optional(SessionIdSchema),
      },
      strict,
    ),
    Type.Object({ header: SessionHeader }),
  ),
  "session.prompt": call(
    "resume",
    Type.Object(
      {
        sessionId: SessionIdSchema,
        text: Type.String({ maxLength: 1_000_000 }),
        clientMessageId: OpaqueIdSchema,
        attachments: Type.Optional(Type.Array(AttachmentInput, { maxItems: 32 })),
        display: Type.Optional(VisibleText({ maxLength: 1_000_000 })),
        hidden: Type.Optional(Type.Boolean()),
        meta: Type.Optional(PromptMeta),
      },
      strict,
    ),
    Type.Object({
      queued: Type.Boolean(),
      seq: Type.Optional(Type.Integer()),
      turnId: Type.Optional(Type.String()),
      itemId: Type.Optional(Type.String()),
    }),
  ),
  "session.rename": call(
    "cold",
    Type.Object({ sessionId: SessionIdSchema, title: VisibleText({ maxLength: 512 }) }, strict),
    Type.Object({ seq: Type.Integer() }),
  ),
  "session.selectModel": call(
    "resume",
    Type.Object({ sessionId: SessionIdSchema, model: Type.String({ minLength: 1, maxLength: 256 }) }, strict),
    Type.Object({ seq: Type.Integer() }),
  ),
  "session.cancel": call(
    "live-only",
    Type.Object({ sessionId: SessionIdSchema }, strict),
    Type.Object({ cancelled: Type.Boolean() }),
  ),
  "session.updateQueue": call(
    "live-only",
    Type.Object({ sessionId: SessionIdSchema, op: QueueOp }, strict),
    Type.Object({ items: Type.Array(QueueItem) }),
  ),
  "session.respond": call(
    "resume",
    Type.Object({ interactionId: OpaqueIdSchema, response: ResponseInput }, strict),
    Type.Object({ resolved: Type.Literal(true) }),
  ),
  "session.ack": call(
    "cold",
    Type.Object({ sessionId: SessionIdSchema, completionSettledAt: Type.Number({ minimum: 0 }) }, strict),
    Type.Object({ hasUnseenCompletion: Type.Boolean() }),
  ),
  "session.clear": call(
    "cold",
    Type.Object(
      { sessionId: SessionIdSchema, expectedEpoch: Type.Optional(Type.String({ maxLength: 128 })) },
      strict,
    ),
    Type.Object({ epoch: Type.String() }),
  ),
  "session.dismiss": call(
    "cold",
    Type.Object({ sessionId: SessionIdSchema }, strict),
    Type.Object({ dismissed: Type.Literal(true) }),
  ),
  "session.restore": call(
    "cold",
    Type.Object({ sessionId: SessionIdSchema }, strict),
    Type.Object({ dismissed: Type.Literal(false) }),
  ),
  "session.delete": call(
    "explicit",
    Type.Object({ sessionId: SessionIdSchema }, strict),
    Type.Object({ deleted: Type.Literal(true) }),
  ),
  "session.follow": stream(
    "cold",
    Type.Object(
      {
        sessionId: SessionIdSchema,
        afterSeq: Type.Optional(Type.Integer({ minimum: 0 })),
        epoch: Type.Optional(Type.String({ maxLength: 128 })),
      },
      strict,
    ),
    FollowItem,
  ),
  "session.control": stream(
    "cold",
    Type.Object(
      {
        /** The baseline as items of at most 64 KiB, each but the last marked `more` (§5). */
        baselineParts: Type.Optional(Type.Boolean()),
      },
      strict,
    ),
    ControlItem,
  ),
  "session.download": stream(
    "cold",
    Type.Object(
      {
        sessionId: SessionIdSchema,
        attachmentId: OpaqueIdSchema,
        offset: Type.Optional(Type.Integer({ minimum: 0 })),
      },
      strict,
    ),
    DownloadItem,
  ),
} as const satisfies Record<string, MethodSpec>;

export type MethodName = keyof typeof Methods;
export type CallMethod = {
  [K in MethodName]: (typeof Methods)[K]["kind"] extends "call" ? K : never;
}[MethodName];
export type StreamMethod = {
  [K in MethodName]: (typeof Methods)[K]["kind"] extends "stream" ? K : never;
}[MethodName];
export type ParamsOf<M extends MethodName> = Static<(typeof Methods)[M]["params"]>;
export type ResultOf<M extends CallMethod> = Static<(typeof Methods)[M]["value"]>;
export type ItemOf<M extends StreamMethod> = Static<(typeof Methods)[M]["value"]>;

export const METHOD_NAMES = Object.keys(Methods) as MethodName[];

export function isMethodName(value: unknown): value is MethodName {
  return typeof value === "string" && Object.hasOwn(Methods, value);
}

/** Rules across a method's fields, checked with its schema wherever params are parsed. */
const CROSS_FIELD_RULES: { [M in MethodName]?: CrossFieldRule<ParamsOf<M>> } = {
  "session.prompt": promptContentViolation,
};

const paramsValidators = new Map<MethodName, Validator<TSchema>>();

/**
 * A method's params validator, built on first use and shared for the life of the process: the
 * mux, the host and a forwarded call all check params with it, none builds one per call.
 */
export function paramsValidator<M extends MethodName>(method: M): Validator<(typeof Methods)[M]["params"]> {
  let check = paramsValidators.get(method);
  if (!check) {
    check = validator(
      Methods[method].params,
      CROSS_FIELD_RULES[method] as CrossFieldRule<unknown> | undefined,
    );
    paramsValidators.set(method, check);
  }
  return check as Validator<(typeof Methods)[M]["params"]>;
}

/** The activation table, derived from the method table so code and tests read one source. */
export const ActivationTable: Readonly<Record<MethodName, Activation>> = Object.fromEntries(
  METHOD_NAMES.map((m) => [m, Methods[m].activation]),
) as Record<MethodName, Activation>;

export type PageResult = Static<typeof PageResult>;
/**
 * A `session.page` answer with each event's `data` typed by its `type`, as `session.follow` items
 * carry them: the schema checks the envelope only, and the host sends what the log holds.
 */
export type SessionPage = Omit<PageResult, "events"> & { events: SessionEvent[] };
export type { AttachmentShell };
