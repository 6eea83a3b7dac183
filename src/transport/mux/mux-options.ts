import { DEFAULT_DECODE_LIMITS, type DecodeLimits } from "../../../protocol/codec.js";
import { Limits } from "../../../protocol/index.js";
import type { FaultLog } from "../fault-log.js";
import type { HostMetrics } from "../metrics.js";
import { PrincipalLimits } from "../principal-limits.js";

/** Where the mux reports faults that are not the client's doing. */
export type MuxLogger = FaultLog;

/** Limits and knobs of the WebSocket mux (protocol-v1 §2, §5, §7). */
export interface MuxOptions {
  /** @default 1 MiB — a larger frame closes the socket with 1009. */
  maxPayloadBytes: number;
  /** @default 256 — open streams per socket; one more is `too_many_streams`. */
  maxStreamsPerSocket: number;
  /** @default 15000 — WebSocket ping interval; a peer silent for two intervals is dropped. */
  pingIntervalMs: number;
  /**
   * @default 4 — quiet ping intervals in a row allowed to a peer the host is behind on (it held a
   * backlog for it since its last pong) before it is dropped; one owed nothing is dropped at its
   * first. Its pongs wait behind what it is still reading, and the kernel shows its reading only
   * in steps: see `Heartbeat`.
   */
  backlogGraceIntervals: number;
  /** @default 4 MiB — socket backlog above which a follower stops receiving live pushes. */
  followerHighWaterBytes: number;
  /**
   * @default 4 MiB — socket backlog above which `event` notifications are dropped for that socket.
   * Notifications carry no sequence (§6) and a client recovers with `session.list`; dropping them
   * keeps a reader that stopped reading from growing the host's memory without bound.
   */
  notificationHighWaterBytes: number;
  /**
   * @default 4 MiB — socket backlog above which the host stops reading the socket and starts no
   * call, whatever the frames are (results, items, notifications).
   */
  sendHighWaterBytes: number;
  /** @default 4 — calls running at once per socket; the next ones wait. */
  maxCallsInFlight: number;
  /** @default 256 — calls waiting for a slot per socket; one more is answered `overloaded`. */
  maxQueuedCalls: number;
  /** @default 500 — events per `events` item during replay; at most `MAX_REPLAY_BATCH`. */
  replayBatch: number;
  /**
   * @default 60000 — how long a follow stream retries a read the store failed retryably (its
   * open's, a log read; `persistence_failure`: a lost PostgreSQL connection) before it ends with
   * that error; 0: not at all. `serve`'s `--follow-read-retry-ms`.
   */
  followReadRetryMs: number;
  /** @default 5000 — control deltas waiting on one reader before it ends with `slow_consumer`. */
  controlMaxQueued: number;
  /**
   * @default 16 MiB — what the control deltas waiting on one reader may weigh (their strings: a
   * queue snapshot carries its prompts' texts) before it ends with `slow_consumer`.
   */
  controlMaxQueuedBytes: number;
  /** @default the limits of protocol-v1 §7 — MessagePack decoder limits for client frames. */
  decodeLimits: DecodeLimits;
  /** @default console — internal errors are logged here (never sent to the peer). */
  logger: MuxLogger;
  /** @default the defaults of `PrincipalLimits` — sockets and session creations per principal. */
  principalLimits: PrincipalLimits;
  /** @default none — frames, bytes, streams, lag and slow followers are counted here. */
  metrics: HostMetrics | undefined;
}

/**
 * The most events per replay item an operator may ask for. An item is also cut at 64 KiB
 * encoded (`Limits.streamItemBytes`), which no more than about 1,500 of the smallest events fit,
 * so a larger batch changes no item: it only widens each read of the log (8 items' worth of rows,
 * `FollowStream`), which at this bound is 80,000 rows.
 */
export const MAX_REPLAY_BATCH = 10_000;

/** How long a follow stream retries a failed log read by default: a database restart or failover. */
export const DEFAULT_FOLLOW_READ_RETRY_MS = 60_000;

const consoleLogger: MuxLogger = {
  error: (obj, msg) => console.error(msg, obj),
};

/** What a host is given: any of the options, and any of the decoder's limits (the rest keep their defaults). */
export type MuxOptionsInput = Partial<Omit<MuxOptions, "decodeLimits">> & {
  decodeLimits?: Partial<DecodeLimits>;
};

export function resolveMuxOptions(options: MuxOptionsInput): MuxOptions {
  return {
    maxPayloadBytes: options.maxPayloadBytes ?? Limits.maxPayloadBytes,
    maxStreamsPerSocket: options.maxStreamsPerSocket ?? Limits.maxStreamsPerSocket,
    pingIntervalMs: options.pingIntervalMs ?? Limits.pingIntervalMs,
    backlogGraceIntervals: options.backlogGraceIntervals ?? Limits.backlogGraceIntervals,
    followerHighWaterBytes: options.followerHighWaterBytes ?? Limits.followerHighWaterBytes,
    notificationHighWaterBytes: options.notificationHighWaterBytes ?? Limits.followerHighWaterBytes,
    sendHighWaterBytes: options.sendHighWaterBytes ?? Limits.sendHighWaterBytes,
    maxCallsInFlight: options.maxCallsInFlight ?? Limits.maxCallsInFlight,
    maxQueuedCalls: options.maxQueuedCalls ?? Limits.maxQueuedCalls,
    replayBatch: options.replayBatch ?? Limits.replayBatch,
    followReadRetryMs: options.followReadRetryMs ?? DEFAULT_FOLLOW_READ_RETRY_MS,
    controlMaxQueued: options.controlMaxQueued ?? 5000,
    controlMaxQueuedBytes: options.controlMaxQueuedBytes ?? 16 * 1024 * 1024,
    decodeLimits: { ...DEFAULT_DECODE_LIMITS, ...options.decodeLimits },
    logger: options.logger ?? consoleLogger,
    principalLimits: options.principalLimits ?? new PrincipalLimits(),
    metrics: options.metrics,
  };
}
