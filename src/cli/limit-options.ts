import { type Command, Option } from "commander";
import { Limits } from "../../protocol/index.js";
import { LIMIT_FLOORS } from "../operations/limit-floors.js";
import { LONGEST_TIMER_MS } from "../operations/longest-timer.js";
import { CALL_INBOX_LIMITS, type CallInboxLimits } from "../store/call-inbox-limits.js";
import { DEFAULT_FOLLOW_READ_RETRY_MS } from "../transport/mux/mux-options.js";
import type { MuxOptions, MuxOptionsInput } from "../transport/mux/mux-server.js";
import { DEFAULT_PRINCIPAL_LIMITS, type PrincipalLimitOptions } from "../transport/principal-limits.js";
import { integer, rate } from "./cli-options.js";

/** One limit of the host a flag (or its environment variable) can change. */
interface LimitFlag {
  readonly flag: string;
  readonly env: string;
  readonly description: string;
  readonly fallback: number;
  /** The least integer it takes, or `rate`: any number above 0, a fraction too. */
  readonly min: number | "rate";
  /** The greatest integer it takes. @default Number.MAX_SAFE_INTEGER */
  readonly max?: number;
}

/** Every limit of docs/reliability.md "Limits", with the flag and variable that change it. */
const MUX_FLAGS = {
  sendHighWaterBytes: {
    flag: "--send-high-water-bytes <n>",
    env: "SESSIONMUX_SEND_HIGH_WATER_BYTES",
    description:
      "unsent bytes on a socket above which the host stops reading it (mux) or holds the next pipelined request (HTTP)",
    fallback: Limits.sendHighWaterBytes,
    min: LIMIT_FLOORS.sendHighWaterBytes,
  },
  maxCallsInFlight: {
    flag: "--max-calls-in-flight <n>",
    env: "SESSIONMUX_MAX_CALLS_IN_FLIGHT",
    description: "calls running at once per socket",
    fallback: Limits.maxCallsInFlight,
    min: 1,
  },
  maxQueuedCalls: {
    flag: "--max-queued-calls <n>",
    env: "SESSIONMUX_MAX_QUEUED_CALLS",
    description: "calls waiting per socket before one is answered overloaded",
    fallback: Limits.maxQueuedCalls,
    min: 0,
  },
  backlogGraceIntervals: {
    flag: "--backlog-grace-intervals <n>",
    env: "SESSIONMUX_BACKLOG_GRACE_INTERVALS",
    description:
      "ping intervals in a row a socket owed a backlog may show no sign of life before it is dropped",
    fallback: Limits.backlogGraceIntervals,
    min: 1,
  },
  maxStreamsPerSocket: {
    flag: "--max-streams-per-socket <n>",
    env: "SESSIONMUX_MAX_STREAMS_PER_SOCKET",
    description: "open streams per socket",
    fallback: Limits.maxStreamsPerSocket,
    min: 1,
  },
  followReadRetryMs: {
    flag: "--follow-read-retry-ms <ms>",
    env: "SESSIONMUX_FOLLOW_READ_RETRY_MS",
    description:
      "how long a follow stream retries a read the database failed (a lost connection), its open's included, before it ends with persistence_failure (0: not at all)",
    fallback: DEFAULT_FOLLOW_READ_RETRY_MS,
    min: 0,
    // the range `createSessionmux` takes for `mux.followReadRetryMs`, a timer's longest delay at most
    max: LONGEST_TIMER_MS,
  },
} as const satisfies Partial<Record<keyof MuxOptions, LimitFlag>>;

const UPLOAD_FLAGS = {
  maxUploadBytes: {
    flag: "--max-upload-bytes <n>",
    env: "SESSIONMUX_MAX_UPLOAD_BYTES",
    description: "size of one upload",
    fallback: Limits.maxAttachmentBytes,
    min: 1,
  },
  uploadQuotaBytes: {
    flag: "--upload-quota-bytes <n>",
    env: "SESSIONMUX_UPLOAD_QUOTA_BYTES",
    description: "bytes of uploads per principal that no prompt references yet",
    fallback: Limits.uploadQuotaBytes,
    min: 1,
  },
  uploadTtlMs: {
    flag: "--upload-ttl-ms <ms>",
    env: "SESSIONMUX_UPLOAD_TTL_MS",
    description: "age at which an upload no prompt references is deleted",
    fallback: Limits.uploadTtlMs,
    min: LIMIT_FLOORS.uploadTtlMs,
  },
} as const satisfies Record<string, LimitFlag>;

const TURN_FLAGS = {
  maxTurnAttachmentBytes: {
    flag: "--max-turn-attachment-bytes <n>",
    env: "SESSIONMUX_MAX_TURN_ATTACHMENT_BYTES",
    description:
      "bytes of attachments one principal's running turns hold, admin too (a prompt past it is overloaded; one whose own pass it, payload_too_large)",
    fallback: Limits.turnAttachmentBytesPerPrincipal,
    min: 1,
  },
} as const satisfies Record<string, LimitFlag>;

const VIEW_FLAGS = {
  maxTranscriptBytes: {
    flag: "--max-transcript-bytes <n>",
    env: "SESSIONMUX_MAX_TRANSCRIPT_BYTES",
    description:
      "stored event data one read of a whole log holds: an HTTP transcript view, an agent's turn.history(), a fork's copied prefix (more is transcript_too_large); also what one principal's HTTP views fold at once (more is overloaded)",
    fallback: Limits.transcriptViewBytes,
    min: LIMIT_FLOORS.maxTranscriptBytes,
  },
} as const satisfies Record<string, LimitFlag>;

const PRINCIPAL_FLAGS = {
  maxSocketsPerPrincipal: {
    flag: "--max-sockets-per-principal <n>",
    env: "SESSIONMUX_MAX_SOCKETS_PER_PRINCIPAL",
    description: "mux sockets one principal may hold open",
    fallback: DEFAULT_PRINCIPAL_LIMITS.maxSocketsPerPrincipal,
    min: 1,
  },
  sessionCreateBurst: {
    flag: "--session-create-burst <n>",
    env: "SESSIONMUX_SESSION_CREATE_BURST",
    description: "sessions a principal may create in a burst",
    fallback: DEFAULT_PRINCIPAL_LIMITS.sessionCreateBurst,
    min: 1,
  },
  sessionCreatePerSecond: {
    flag: "--session-create-per-second <n>",
    env: "SESSIONMUX_SESSION_CREATE_PER_SECOND",
    description: "sessions per second a principal's burst refills",
    fallback: DEFAULT_PRINCIPAL_LIMITS.sessionCreatePerSecond,
    min: "rate",
  },
  maxSessionsPerPrincipal: {
    flag: "--max-sessions-per-principal <n>",
    env: "SESSIONMUX_MAX_SESSIONS_PER_PRINCIPAL",
    description: "live sessions a principal may hold (more is too_many_sessions)",
    fallback: DEFAULT_PRINCIPAL_LIMITS.maxSessionsPerPrincipal,
    min: 1,
  },
  maxStoredBytesPerPrincipal: {
    flag: "--max-stored-bytes-per-principal <n>",
    env: "SESSIONMUX_MAX_STORED_BYTES_PER_PRINCIPAL",
    description: "bytes a principal may store, event data and attachments (past it: storage_quota_exceeded)",
    fallback: DEFAULT_PRINCIPAL_LIMITS.maxStoredBytesPerPrincipal,
    min: 1,
  },
  maxSearchesPerPrincipal: {
    flag: "--max-searches-per-principal <n>",
    env: "SESSIONMUX_MAX_SEARCHES_PER_PRINCIPAL",
    description: "session.search calls a principal may have running at once (more is overloaded)",
    fallback: DEFAULT_PRINCIPAL_LIMITS.maxSearchesPerPrincipal,
    min: 1,
  },
  maxControlStreamsPerPrincipal: {
    flag: "--max-control-streams-per-principal <n>",
    env: "SESSIONMUX_MAX_CONTROL_STREAMS_PER_PRINCIPAL",
    description:
      "session.control streams a principal may hold open across its sockets (more is too_many_streams)",
    fallback: DEFAULT_PRINCIPAL_LIMITS.maxControlStreamsPerPrincipal,
    min: 1,
  },
} as const satisfies Record<keyof PrincipalLimitOptions, LimitFlag>;

/**
 * The call inbox of several hosts on PostgreSQL (`CallInboxLimits`, named here as the flags name
 * them): as the host that forwards a call, and as its owner.
 */
const CALL_INBOX_FLAGS = {
  maxForwardedCalls: {
    flag: "--max-forwarded-calls <n>",
    env: "SESSIONMUX_MAX_FORWARDED_CALLS",
    description:
      "PostgreSQL: calls this host forwarded to the hosts owning their sessions and waits on (more are overloaded)",
    fallback: CALL_INBOX_LIMITS.maxPending,
    min: 1,
  },
  maxForwardedCallsPerPrincipal: {
    flag: "--max-forwarded-calls-per-principal <n>",
    env: "SESSIONMUX_MAX_FORWARDED_CALLS_PER_PRINCIPAL",
    description: "PostgreSQL: of those, the calls of one principal (more of its calls are overloaded)",
    fallback: CALL_INBOX_LIMITS.maxPendingPerPrincipal,
    min: 1,
  },
  maxForwardedCallBytes: {
    flag: "--max-forwarded-call-bytes <n>",
    env: "SESSIONMUX_MAX_FORWARDED_CALL_BYTES",
    description:
      "PostgreSQL: bytes of those calls, as encoded, until they are answered (more are overloaded; a larger one goes alone)",
    fallback: CALL_INBOX_LIMITS.maxPendingBytes,
    min: 1,
  },
  maxForwardedReplyBytes: {
    flag: "--max-forwarded-reply-bytes <n>",
    env: "SESSIONMUX_MAX_FORWARDED_REPLY_BYTES",
    description:
      "PostgreSQL: bytes of replies to those calls this host reads back at once (more wait in the database)",
    fallback: CALL_INBOX_LIMITS.maxReplyBytes,
    min: 1,
  },
  maxServingCalls: {
    flag: "--max-serving-calls <n>",
    env: "SESSIONMUX_MAX_SERVING_CALLS",
    description:
      "PostgreSQL: calls other hosts forwarded to this one that it holds at once (more wait in the database)",
    fallback: CALL_INBOX_LIMITS.maxServing,
    min: 1,
  },
  maxServingCallBytes: {
    flag: "--max-serving-call-bytes <n>",
    env: "SESSIONMUX_MAX_SERVING_CALL_BYTES",
    description:
      "PostgreSQL: bytes of those calls and their replies this host holds at once (more wait in the database)",
    fallback: CALL_INBOX_LIMITS.maxServingBytes,
    min: 1,
  },
  claimedCallWaitMs: {
    flag: "--claimed-call-wait-ms <ms>",
    env: "SESSIONMUX_CLAIMED_CALL_WAIT_MS",
    description:
      "PostgreSQL: how long, from its arrival, a forwarded call its owner claimed is waited on while the owner holds the session, then answered overloaded if the owner had not begun it (taken back, never run), else outcome_unknown (at least the forward wait)",
    fallback: CALL_INBOX_LIMITS.claimedWaitMs,
    min: LIMIT_FLOORS.claimedWaitMs,
    // the wait is a timer's: a longer one would fire at once
    max: LONGEST_TIMER_MS,
  },
} as const satisfies Record<string, LimitFlag>;

const ALL_FLAGS = {
  ...MUX_FLAGS,
  ...UPLOAD_FLAGS,
  ...TURN_FLAGS,
  ...VIEW_FLAGS,
  ...PRINCIPAL_FLAGS,
  ...CALL_INBOX_FLAGS,
};

export type LimitValues = Record<keyof typeof ALL_FLAGS, number> & { metricsToken?: string };

export function addLimitOptions(command: Command): Command {
  command.addOption(
    new Option("--metrics-token <token>", "a token that reads /metrics only (admin tokens can too)").env(
      "SESSIONMUX_METRICS_TOKEN",
    ),
  );
  for (const spec of Object.values(ALL_FLAGS) as LimitFlag[]) {
    const name = spec.flag.split(" ")[0] ?? spec.flag;
    command.addOption(
      new Option(spec.flag, spec.description)
        .env(spec.env)
        .argParser(spec.min === "rate" ? rate(name) : integer(name, spec.min, spec.max))
        .default(spec.fallback),
    );
  }
  return command;
}

/** The per-principal limits the flags set. */
export function principalLimitsOf(values: LimitValues): PrincipalLimitOptions {
  return {
    maxSocketsPerPrincipal: values.maxSocketsPerPrincipal,
    sessionCreateBurst: values.sessionCreateBurst,
    sessionCreatePerSecond: values.sessionCreatePerSecond,
    maxSessionsPerPrincipal: values.maxSessionsPerPrincipal,
    maxStoredBytesPerPrincipal: values.maxStoredBytesPerPrincipal,
    maxSearchesPerPrincipal: values.maxSearchesPerPrincipal,
    maxControlStreamsPerPrincipal: values.maxControlStreamsPerPrincipal,
  };
}

/**
 * The HTTP options the limit flags set: uploads, transcript views, and the send backlog above
 * which a connection's next pipelined request waits (the mux's high-water mark, one flag for both).
 */
export function httpLimitsOf(values: LimitValues): {
  maxUploadBytes: number;
  uploadQuotaBytes: number;
  maxTranscriptBytes: number;
  sendHighWaterBytes: number;
} {
  return {
    maxUploadBytes: values.maxUploadBytes,
    uploadQuotaBytes: values.uploadQuotaBytes,
    maxTranscriptBytes: values.maxTranscriptBytes,
    sendHighWaterBytes: values.sendHighWaterBytes,
  };
}

/** The call inbox settings the limit flags set (a host on SQLite has no inbox, and ignores them). */
export function callInboxLimitsOf(values: LimitValues): CallInboxLimits {
  return {
    maxPending: values.maxForwardedCalls,
    maxPendingPerPrincipal: values.maxForwardedCallsPerPrincipal,
    maxPendingBytes: values.maxForwardedCallBytes,
    maxReplyBytes: values.maxForwardedReplyBytes,
    maxServing: values.maxServingCalls,
    maxServingBytes: values.maxServingCallBytes,
    claimedWaitMs: values.claimedCallWaitMs,
  };
}

/**
 * Every option of a mounted host (`createSessionmux`) the limit flags set, by its option path:
 * `serve` builds its host from these (docs/reliability.md, "The limit flags as options of a mounted
 * host", lists them). `callInbox` acts on PostgreSQL only.
 */
export function mountedLimitsOf(values: LimitValues): {
  mux: MuxOptionsInput;
  http: ReturnType<typeof httpLimitsOf>;
  principals: PrincipalLimitOptions;
  callInbox: CallInboxLimits;
  uploadTtlMs: number;
  maxTurnAttachmentBytes: number;
} {
  return {
    mux: muxLimitsOf(values),
    http: httpLimitsOf(values),
    principals: principalLimitsOf(values),
    callInbox: callInboxLimitsOf(values),
    uploadTtlMs: values.uploadTtlMs,
    maxTurnAttachmentBytes: values.maxTurnAttachmentBytes,
  };
}

/** The mux options the limit flags set. */
export function muxLimitsOf(values: LimitValues): MuxOptionsInput {
  return {
    sendHighWaterBytes: values.sendHighWaterBytes,
    maxCallsInFlight: values.maxCallsInFlight,
    maxQueuedCalls: values.maxQueuedCalls,
    maxStreamsPerSocket: values.maxStreamsPerSocket,
    backlogGraceIntervals: values.backlogGraceIntervals,
    followReadRetryMs: values.followReadRetryMs,
  };
}
