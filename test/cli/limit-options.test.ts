import { Command } from "commander";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  addLimitOptions,
  callInboxLimitsOf,
  httpLimitsOf,
  type LimitValues,
  muxLimitsOf,
  principalLimitsOf,
} from "../../src/cli/limit-options.js";
import { commanderRefusal } from "./commander-refusal.js";

/**
 * Every limit flag of `sessionmux serve`, written out from docs/reliability.md "Limits" (flag,
 * variable, default) and its closing list of the smallest values, not read back from the module:
 * a flag renamed, a default changed or a limit sent to the wrong option fails here.
 */
const LIMITS = [
  {
    key: "maxStreamsPerSocket",
    to: ["mux"],
    flag: "--max-streams-per-socket",
    env: "SESSIONMUX_MAX_STREAMS_PER_SOCKET",
    fallback: 256,
    min: 1,
  },
  // the mux's send backlog and the HTTP answers held per connection: one flag for both, as the docs' table says
  {
    key: "sendHighWaterBytes",
    to: ["mux", "http"],
    flag: "--send-high-water-bytes",
    env: "SESSIONMUX_SEND_HIGH_WATER_BYTES",
    fallback: 4 * 1024 * 1024,
    min: 1024,
  },
  {
    key: "backlogGraceIntervals",
    to: ["mux"],
    flag: "--backlog-grace-intervals",
    env: "SESSIONMUX_BACKLOG_GRACE_INTERVALS",
    fallback: 4,
    min: 1,
  },
  {
    key: "maxCallsInFlight",
    to: ["mux"],
    flag: "--max-calls-in-flight",
    env: "SESSIONMUX_MAX_CALLS_IN_FLIGHT",
    fallback: 4,
    min: 1,
  },
  {
    key: "maxQueuedCalls",
    to: ["mux"],
    flag: "--max-queued-calls",
    env: "SESSIONMUX_MAX_QUEUED_CALLS",
    fallback: 256,
    min: 0,
  },
  // how long a follow stream retries a read the database failed: 0 for not at all, no longer than
  // a Node timer's longest delay
  {
    key: "followReadRetryMs",
    to: ["mux"],
    flag: "--follow-read-retry-ms",
    env: "SESSIONMUX_FOLLOW_READ_RETRY_MS",
    fallback: 60_000,
    min: 0,
    max: 2 ** 31 - 1,
  },
  {
    key: "maxSocketsPerPrincipal",
    to: ["principal"],
    flag: "--max-sockets-per-principal",
    env: "SESSIONMUX_MAX_SOCKETS_PER_PRINCIPAL",
    fallback: 64,
    min: 1,
  },
  {
    key: "maxSessionsPerPrincipal",
    to: ["principal"],
    flag: "--max-sessions-per-principal",
    env: "SESSIONMUX_MAX_SESSIONS_PER_PRINCIPAL",
    fallback: 10_000,
    min: 1,
  },
  {
    key: "maxStoredBytesPerPrincipal",
    to: ["principal"],
    flag: "--max-stored-bytes-per-principal",
    env: "SESSIONMUX_MAX_STORED_BYTES_PER_PRINCIPAL",
    fallback: 1024 * 1024 * 1024,
    min: 1,
  },
  {
    key: "maxSearchesPerPrincipal",
    to: ["principal"],
    flag: "--max-searches-per-principal",
    env: "SESSIONMUX_MAX_SEARCHES_PER_PRINCIPAL",
    fallback: 8,
    min: 1,
  },
  {
    key: "maxControlStreamsPerPrincipal",
    to: ["principal"],
    flag: "--max-control-streams-per-principal",
    env: "SESSIONMUX_MAX_CONTROL_STREAMS_PER_PRINCIPAL",
    fallback: 256,
    min: 1,
  },
  {
    key: "sessionCreateBurst",
    to: ["principal"],
    flag: "--session-create-burst",
    env: "SESSIONMUX_SESSION_CREATE_BURST",
    fallback: 200,
    min: 1,
  },
  {
    key: "sessionCreatePerSecond",
    to: ["principal"],
    flag: "--session-create-per-second",
    env: "SESSIONMUX_SESSION_CREATE_PER_SECOND",
    fallback: 10,
    // a rate: any number above 0, a fraction too (0.5 is a session every two seconds)
    min: "rate",
  },
  {
    key: "maxUploadBytes",
    to: ["http"],
    flag: "--max-upload-bytes",
    env: "SESSIONMUX_MAX_UPLOAD_BYTES",
    fallback: 10 * 1024 * 1024,
    min: 1,
  },
  {
    key: "uploadQuotaBytes",
    to: ["http"],
    flag: "--upload-quota-bytes",
    env: "SESSIONMUX_UPLOAD_QUOTA_BYTES",
    fallback: 64 * 1024 * 1024,
    min: 1,
  },
  {
    key: "uploadTtlMs",
    to: ["host"],
    flag: "--upload-ttl-ms",
    env: "SESSIONMUX_UPLOAD_TTL_MS",
    fallback: 60 * 60 * 1000,
    min: 1000,
  },
  {
    key: "maxTurnAttachmentBytes",
    to: ["host"],
    flag: "--max-turn-attachment-bytes",
    env: "SESSIONMUX_MAX_TURN_ATTACHMENT_BYTES",
    fallback: 64 * 1024 * 1024,
    min: 1,
  },
  {
    key: "maxTranscriptBytes",
    to: ["http"],
    flag: "--max-transcript-bytes",
    env: "SESSIONMUX_MAX_TRANSCRIPT_BYTES",
    fallback: 32 * 1024 * 1024,
    min: 1024 * 1024,
  },
  // the call inbox of hosts sharing PostgreSQL (the forwarding host's side, then the owner's): each
  // sets the inbox `option` of another name
  {
    key: "maxForwardedCalls",
    option: "maxPending",
    to: ["inbox"],
    flag: "--max-forwarded-calls",
    env: "SESSIONMUX_MAX_FORWARDED_CALLS",
    fallback: 256,
    min: 1,
  },
  {
    key: "maxForwardedCallsPerPrincipal",
    option: "maxPendingPerPrincipal",
    to: ["inbox"],
    flag: "--max-forwarded-calls-per-principal",
    env: "SESSIONMUX_MAX_FORWARDED_CALLS_PER_PRINCIPAL",
    fallback: 64,
    min: 1,
  },
  {
    key: "maxForwardedCallBytes",
    option: "maxPendingBytes",
    to: ["inbox"],
    flag: "--max-forwarded-call-bytes",
    env: "SESSIONMUX_MAX_FORWARDED_CALL_BYTES",
    fallback: 32 * 1024 * 1024,
    min: 1,
  },
  {
    key: "maxForwardedReplyBytes",
    option: "maxReplyBytes",
    to: ["inbox"],
    flag: "--max-forwarded-reply-bytes",
    env: "SESSIONMUX_MAX_FORWARDED_REPLY_BYTES",
    fallback: 32 * 1024 * 1024,
    min: 1,
  },
  {
    key: "maxServingCalls",
    option: "maxServing",
    to: ["inbox"],
    flag: "--max-serving-calls",
    env: "SESSIONMUX_MAX_SERVING_CALLS",
    fallback: 256,
    min: 1,
  },
  {
    key: "maxServingCallBytes",
    option: "maxServingBytes",
    to: ["inbox"],
    flag: "--max-serving-call-bytes",
    env: "SESSIONMUX_MAX_SERVING_CALL_BYTES",
    fallback: 32 * 1024 * 1024,
    min: 1,
  },
  // how long a sender waits on a call its owner claimed: no shorter than the forward wait (5 s),
  // no longer than a Node timer's longest delay
  {
    key: "claimedCallWaitMs",
    option: "claimedWaitMs",
    to: ["inbox"],
    flag: "--claimed-call-wait-ms",
    env: "SESSIONMUX_CLAIMED_CALL_WAIT_MS",
    fallback: 60_000,
    min: 5000,
    max: 2 ** 31 - 1,
  },
] as const;

type LimitKey = (typeof LIMITS)[number]["key"];

/** The name of the option a limit sets where the host takes it. */
const optionOf = (limit: (typeof LIMITS)[number]): string => ("option" in limit ? limit.option : limit.key);

/** The limits that take integers from a least one: all but the rate. */
const INTEGER_LIMITS = LIMITS.filter(
  (limit): limit is Extract<(typeof LIMITS)[number], { min: number }> => limit.min !== "rate",
);

/** The values a limit takes, as its refusal words them. */
const rangeOf = (limit: (typeof INTEGER_LIMITS)[number]): string =>
  "max" in limit ? `from ${limit.min} to ${limit.max}` : `≥ ${limit.min}`;

/**
 * What `serve` hands the host: the mux, HTTP, principal and call inbox options, the upload
 * lifetime and the attachment bytes a principal's running turns hold.
 */
interface HostLimits {
  mux: Record<string, unknown>;
  http: Record<string, unknown>;
  principal: Record<string, unknown>;
  inbox: Record<string, unknown>;
  host: { uploadTtlMs: number; maxTurnAttachmentBytes: number };
  metricsToken: string | undefined;
}

/** The limits `serve` starts the host with for these arguments and variables, built as serve-command.ts does. */
function parseServe(argv: string[], env: Record<string, string> = {}): HostLimits {
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  const serve = addLimitOptions(
    new Command("serve").exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} }),
  );
  serve.parse(argv, { from: "user" });
  const options = serve.opts<LimitValues>();
  return {
    mux: muxLimitsOf(options),
    http: httpLimitsOf(options),
    principal: { ...principalLimitsOf(options) },
    inbox: { ...callInboxLimitsOf(options) },
    host: { uploadTtlMs: options.uploadTtlMs, maxTurnAttachmentBytes: options.maxTurnAttachmentBytes },
    metricsToken: options.metricsToken,
  };
}

/** The limits with none given, each where the host takes it. */
function fallbacks(): HostLimits {
  const limits: HostLimits = {
    mux: {},
    http: {},
    principal: {},
    inbox: {},
    host: { uploadTtlMs: 0, maxTurnAttachmentBytes: 0 },
    metricsToken: undefined,
  };
  for (const limit of LIMITS)
    for (const to of limit.to) (limits[to] as Record<string, number>)[optionOf(limit)] = limit.fallback;
  return limits;
}

/** The fallbacks with `key` set to `value`: the one limit a flag or variable changes. */
function withLimit(key: LimitKey, value: number): HostLimits {
  const limits = fallbacks();
  const limit = LIMITS.find((l) => l.key === key);
  if (!limit) throw new Error(`no limit ${key}`);
  for (const to of limit.to) (limits[to] as Record<string, number>)[optionOf(limit)] = value;
  return limits;
}

const refusal = (argv: string[], env: Record<string, string> = {}) =>
  commanderRefusal(() => parseServe(argv, env), [argv, env]);

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("serve limit flags", () => {
  it("are exactly the documented ones, each with its variable, a description and its default in --help", () => {
    const serve = addLimitOptions(new Command("serve"));
    const options = serve.options.map((o) => [o.long, o.envVar, o.description.length > 0]);
    expect(options).toEqual(
      expect.arrayContaining([
        ["--metrics-token", "SESSIONMUX_METRICS_TOKEN", true],
        ...LIMITS.map((l) => [l.flag, l.env, true]),
      ]),
    );
    expect(options).toHaveLength(LIMITS.length + 1);
    const help = serve.createHelp();
    for (const limit of LIMITS) {
      const option = serve.options.find((o) => o.long === limit.flag);
      expect(option && help.optionDescription(option)).toMatch(
        new RegExp(`^\\S.* \\(default: ${limit.fallback}, env: ${limit.env}\\)$`),
      );
    }
  });

  it("give the host every documented default when neither flag nor variable is set", () => {
    const limits = parseServe([]);
    expect(limits).toEqual(fallbacks());
    expect(limits.mux).toEqual({
      sendHighWaterBytes: 4 * 1024 * 1024,
      maxCallsInFlight: 4,
      maxQueuedCalls: 256,
      maxStreamsPerSocket: 256,
      backlogGraceIntervals: 4,
      followReadRetryMs: 60_000,
    });
    expect(limits.http).toEqual({
      maxUploadBytes: 10 * 1024 * 1024,
      uploadQuotaBytes: 64 * 1024 * 1024,
      maxTranscriptBytes: 32 * 1024 * 1024,
      sendHighWaterBytes: 4 * 1024 * 1024,
    });
    expect(limits.principal).toEqual({
      maxSocketsPerPrincipal: 64,
      sessionCreateBurst: 200,
      sessionCreatePerSecond: 10,
      maxSessionsPerPrincipal: 10_000,
      maxStoredBytesPerPrincipal: 1024 * 1024 * 1024,
      maxSearchesPerPrincipal: 8,
      maxControlStreamsPerPrincipal: 256,
    });
    expect(limits.inbox).toEqual({
      maxPending: 256,
      maxPendingPerPrincipal: 64,
      maxPendingBytes: 32 * 1024 * 1024,
      maxReplyBytes: 32 * 1024 * 1024,
      maxServing: 256,
      maxServingBytes: 32 * 1024 * 1024,
      claimedWaitMs: 60_000,
    });
  });

  it("each change the one limit they name, from the flag or the variable, and the flag wins over the variable", () => {
    for (const [index, limit] of LIMITS.entries()) {
      // a value of its own per limit, so one limit handed to another's option shows
      const value = limit.min === "rate" ? 1000.5 + index : limit.min + 1000 + index;
      expect(parseServe([limit.flag, String(value)])).toEqual(withLimit(limit.key, value));
      expect(parseServe([`${limit.flag}=${value}`])).toEqual(withLimit(limit.key, value));
      vi.unstubAllEnvs();
      expect(parseServe([], { [limit.env]: String(value) })).toEqual(withLimit(limit.key, value));
      vi.unstubAllEnvs();
      expect(parseServe([limit.flag, String(value + 1)], { [limit.env]: String(value) })).toEqual(
        withLimit(limit.key, value + 1),
      );
      vi.unstubAllEnvs();
    }
  });

  it("take the smallest documented value and refuse one less, naming the flag and the least value", () => {
    for (const limit of INTEGER_LIMITS) {
      expect(parseServe([limit.flag, String(limit.min)])).toEqual(withLimit(limit.key, limit.min));
      expect(parseServe([], { [limit.env]: String(limit.min) })).toEqual(withLimit(limit.key, limit.min));
      vi.unstubAllEnvs();
      const below = String(limit.min - 1);
      const fromFlag = refusal([limit.flag, below]);
      expect(fromFlag.code).toBe("commander.invalidArgument");
      expect(fromFlag.exitCode).toBe(1);
      expect(fromFlag.message).toBe(
        `error: option '${limit.flag} <${limit.flag.endsWith("-ms") ? "ms" : "n"}>' argument '${below}' is invalid. ` +
          `${limit.flag} must be an integer ${rangeOf(limit)} in decimal digits, got "${below}"`,
      );
      const fromEnv = refusal([], { [limit.env]: below });
      expect(fromEnv.code).toBe("commander.invalidArgument");
      expect(fromEnv.message).toContain(
        `from env '${limit.env}' is invalid. ${limit.flag} must be an integer ${rangeOf(limit)} in decimal digits, got "${below}"`,
      );
      vi.unstubAllEnvs();
    }
  });

  it("take the greatest value of a limit that has one and refuse one more, naming the flag and its range", () => {
    const bounded = INTEGER_LIMITS.filter((limit) => "max" in limit);
    expect(bounded.map((limit) => limit.flag)).toEqual(["--follow-read-retry-ms", "--claimed-call-wait-ms"]);
    for (const limit of bounded) {
      expect(parseServe([limit.flag, String(limit.max)])).toEqual(withLimit(limit.key, limit.max));
      const above = String(limit.max + 1);
      const fromFlag = refusal([limit.flag, above]);
      expect(fromFlag.code).toBe("commander.invalidArgument");
      expect(fromFlag.message).toBe(
        `error: option '${limit.flag} <ms>' argument '${above}' is invalid. ` +
          `${limit.flag} must be an integer ${rangeOf(limit)} in decimal digits, got "${above}"`,
      );
      expect(refusal([], { [limit.env]: above }).message).toContain(
        `from env '${limit.env}' is invalid. ${limit.flag} must be an integer ${rangeOf(limit)}`,
      );
      vi.unstubAllEnvs();
    }
  });

  it("refuse a value that is not an integer in decimal digits, empty included", () => {
    for (const limit of INTEGER_LIMITS) {
      const at = String(limit.min + 2);
      for (const bad of [
        "",
        " ",
        `${at}.5`,
        `${at}.0`,
        "1e9",
        "0x10000000",
        ` ${at}`,
        `${at} `,
        `+${at}`,
        `${at}k`,
        "ten",
      ]) {
        expect(refusal([limit.flag, bad]).message).toContain(
          `${limit.flag} must be an integer ${rangeOf(limit)} in decimal digits, got ${JSON.stringify(bad)}`,
        );
        expect(refusal([], { [limit.env]: bad }).message).toContain(`from env '${limit.env}' is invalid.`);
        vi.unstubAllEnvs();
      }
    }
  });

  it("take a session creation rate above 0 with a fraction, and refuse 0 or anything not in decimal digits", () => {
    const flag = "--session-create-per-second";
    const env = "SESSIONMUX_SESSION_CREATE_PER_SECOND";
    for (const [given, value] of [
      ["0.5", 0.5],
      ["0.001", 0.001],
      ["3", 3],
      ["2.25", 2.25],
    ] as const) {
      expect(parseServe([flag, given])).toEqual(withLimit("sessionCreatePerSecond", value));
      expect(parseServe([], { [env]: given })).toEqual(withLimit("sessionCreatePerSecond", value));
      vi.unstubAllEnvs();
    }
    for (const bad of [
      "0",
      "0.0",
      "00",
      "",
      " ",
      ".5",
      "5.",
      "-1",
      "+1",
      "1e3",
      "0x10",
      "1,5",
      "ten",
      "Infinity",
    ]) {
      const fromFlag = refusal([flag, bad]);
      expect(fromFlag.code).toBe("commander.invalidArgument");
      expect(fromFlag.message).toBe(
        `error: option '${flag} <n>' argument '${bad}' is invalid. ` +
          `${flag} must be a number above 0 in decimal digits, got ${JSON.stringify(bad)}`,
      );
      expect(refusal([], { [env]: bad }).message).toContain(
        `from env '${env}' is invalid. ${flag} must be a number above 0 in decimal digits`,
      );
      vi.unstubAllEnvs();
    }
  });

  it("take a metrics token from the flag or the variable, the flag winning, and none by default", () => {
    expect(parseServe([]).metricsToken).toBeUndefined();
    expect(parseServe(["--metrics-token", "scrape"])).toEqual({ ...fallbacks(), metricsToken: "scrape" });
    expect(parseServe([], { SESSIONMUX_METRICS_TOKEN: "from-env" }).metricsToken).toBe("from-env");
    expect(
      parseServe(["--metrics-token", "from-flag"], { SESSIONMUX_METRICS_TOKEN: "from-env" }).metricsToken,
    ).toBe("from-flag");
  });
});
