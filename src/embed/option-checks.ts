import { LIMIT_FLOORS } from "../operations/limit-floors.js";
import { LONGEST_TIMER_MS } from "../operations/longest-timer.js";
import { StartupError } from "../operations/startup-error.js";
import type { CallInboxLimits } from "../store/call-inbox-limits.js";
import { LONGEST_QUERY_CHECK_MS } from "../store/postgres/pg-backend-watch.js";
import { MAX_REPLAY_BATCH } from "../transport/mux/mux-options.js";
import type { SessionmuxOptions } from "./create-sessionmux.js";
import { checkOptionShape } from "./option-shape.js";
import { describeOptionValue } from "./option-value.js";

/**
 * What a numeric option may hold: a whole number from `min` (to `max`, if given), or
 * (`fraction`) any finite one above 0.
 */
type Rule = { min: number; max?: number } | { fraction: true };

const COUNT: Rule = { min: 1 };
/** A delay a timer waits: no longer than Node's longest, which would fire after 1 ms instead. */
const DELAY: Rule = { min: 1, max: LONGEST_TIMER_MS };

/** At least the floor `serve`'s flag has (see `LIMIT_FLOORS`). */
const floor = (name: keyof typeof LIMIT_FLOORS): Rule => ({ min: LIMIT_FLOORS[name] });

const TOP: Partial<Record<keyof SessionmuxOptions, Rule>> = {
  dbPoolSize: COUNT,
  dbListenCheckMs: { min: LIMIT_FLOORS.dbCheckMs, max: LONGEST_TIMER_MS },
  // a handshake may take twice it, on a timer too
  dbQueryCheckMs: { min: LIMIT_FLOORS.dbCheckMs, max: LONGEST_QUERY_CHECK_MS },
  leaseTtlMs: DELAY,
  idleDetachMs: DELAY,
  turnStopGraceMs: { min: 0, max: LONGEST_TIMER_MS },
  readinessIntervalMs: DELAY,
  uploadTtlMs: floor("uploadTtlMs"),
  maxTurnAttachmentBytes: COUNT,
};

const GROUPS: {
  [K in "authenticateLimits" | "principals" | "callInbox" | "mux" | "http"]: Record<string, Rule>;
} = {
  authenticateLimits: { maxPending: COUNT, timeoutMs: DELAY },
  principals: {
    maxSocketsPerPrincipal: COUNT,
    sessionCreateBurst: COUNT,
    sessionCreatePerSecond: { fraction: true },
    maxSessionsPerPrincipal: COUNT,
    maxStoredBytesPerPrincipal: COUNT,
    maxSearchesPerPrincipal: COUNT,
    maxControlStreamsPerPrincipal: COUNT,
  },
  callInbox: {
    maxPending: COUNT,
    maxPendingPerPrincipal: COUNT,
    maxPendingBytes: COUNT,
    maxReplyBytes: COUNT,
    maxServing: COUNT,
    maxServingBytes: COUNT,
    // no shorter than the forward wait, a timer's delay
    claimedWaitMs: { min: LIMIT_FLOORS.claimedWaitMs, max: LONGEST_TIMER_MS },
  } satisfies Record<keyof CallInboxLimits, Rule>,
  mux: {
    maxPayloadBytes: COUNT,
    maxStreamsPerSocket: COUNT,
    pingIntervalMs: DELAY,
    backlogGraceIntervals: COUNT,
    followerHighWaterBytes: COUNT,
    notificationHighWaterBytes: COUNT,
    sendHighWaterBytes: floor("sendHighWaterBytes"),
    maxCallsInFlight: COUNT,
    maxQueuedCalls: { min: 0 },
    replayBatch: { min: 1, max: MAX_REPLAY_BATCH },
    followReadRetryMs: { min: 0, max: LONGEST_TIMER_MS },
    controlMaxQueued: COUNT,
    controlMaxQueuedBytes: COUNT,
  },
  http: {
    maxBodyBytes: COUNT,
    maxUploadBytes: COUNT,
    uploadQuotaBytes: COUNT,
    maxTranscriptBytes: floor("maxTranscriptBytes"),
    sendHighWaterBytes: floor("sendHighWaterBytes"),
  },
};

/**
 * Refuses a limit or interval that is no number in its range before anything is opened. Each is
 * read with `??` and compared with `>`, so `NaN` (`Number(process.env.X)` of an unset variable)
 * switched a limit off (a request body or a principal's sockets without bound), 0 stalled every
 * call (`maxCallsInFlight`) or checked the database in a busy loop (`readinessIntervalMs`), and
 * a string compared as one.
 */
export function checkOptions(options: SessionmuxOptions): void {
  checkOptionShape(options);
  // read as plain data: an app in JavaScript (or a cast) may hand anything
  const given: Record<string, unknown> = { ...options };
  for (const [name, rule] of Object.entries(TOP)) check(name, given[name], rule);
  for (const [group, rules] of Object.entries(GROUPS)) checkGroup(group, given[group], rules);
  const mux = given.mux as Record<string, unknown> | undefined;
  checkGroup("mux.decodeLimits", mux?.decodeLimits, DECODE_LIMITS);
}

/**
 * The decoder's limits on a client's frame: a `NaN` or negative one compared false with every
 * length, so that limit was off (a string as long as the frame, nesting as deep as its bytes).
 */
const DECODE_LIMITS: Record<string, Rule> = {
  maxStrBytes: COUNT,
  maxBinBytes: COUNT,
  maxArrayLength: COUNT,
  maxMapLength: COUNT,
  maxDepth: COUNT,
  maxValues: COUNT,
};

/**
 * The options of a group that are no number: a group's names are its numbers' and these, and any
 * other is refused (a misspelt `mux.pingIntervalMS` left the ping at its default). The parts the
 * host builds itself (the mux's `principalLimits`, the routes' `logger`, `uploadLedger` and
 * `readiness`) are not among them: given, they were replaced without a word.
 */
const OTHER_MEMBERS: Record<string, readonly string[]> = {
  mux: ["decodeLimits"],
  http: ["webRoot"],
};

function checkGroup(group: string, values: unknown, rules: Record<string, Rule>): void {
  if (values === undefined) return;
  if (values === null || typeof values !== "object") {
    throw new StartupError(
      "option_invalid",
      `${group} must be an object, got ${describeOptionValue(values)}`,
    );
  }
  const known = [...Object.keys(rules), ...(OTHER_MEMBERS[group] ?? [])];
  const unknown = Object.keys(values).filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    throw new StartupError(
      "option_invalid",
      `unknown option ${unknown.map((name) => `${group}.${name}`).join(", ")}; ${group} takes ${known.join(", ")}`,
    );
  }
  for (const [name, rule] of Object.entries(rules))
    check(`${group}.${name}`, (values as Record<string, unknown>)[name], rule);
}

function check(name: string, value: unknown, rule: Rule): void {
  if (value === undefined) return;
  const fine =
    typeof value === "number" &&
    ("fraction" in rule
      ? Number.isFinite(value) && value > 0
      : Number.isSafeInteger(value) && value >= rule.min && (rule.max === undefined || value <= rule.max));
  if (fine) return;
  const wanted =
    "fraction" in rule
      ? "a finite number above 0"
      : rule.max === undefined
        ? `an integer ≥ ${rule.min}`
        : `an integer from ${rule.min} to ${rule.max}`;
  throw new StartupError("option_invalid", `${name} must be ${wanted}, got ${describeOptionValue(value)}`);
}
