import { afterEach, describe, expect, it, vi } from "vitest";
import { commanderRefusal } from "./commander-refusal.js";
import { parseServe } from "./in-process-command.js";

/** Node's longest timer delay: 2^31 − 1 ms. A longer one fires after 1 ms instead. */
const LONGEST_TIMER_MS = 2_147_483_647;

/** The millisecond flags of `serve` that set a timer, with their least value (README, "CLI"). */
const TIMER_FLAGS = [
  { flag: "--ping-interval-ms", env: "SESSIONMUX_PING_INTERVAL_MS", key: "pingIntervalMs", min: 10 },
  { flag: "--idle-detach-ms", env: "SESSIONMUX_IDLE_DETACH_MS", key: "idleDetachMs", min: 1 },
  { flag: "--lease-ttl-ms", env: "SESSIONMUX_LEASE_TTL_MS", key: "leaseTtlMs", min: 100 },
] as const;

const refusal = (argv: string[], env: Record<string, string> = {}) =>
  commanderRefusal(() => parseServe(argv, env), [argv, env]);

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("serve flags that set a timer", () => {
  it("take up to Node's longest timer delay and refuse a longer one, which would fire after 1 ms", () => {
    for (const { flag, env, key, min } of TIMER_FLAGS) {
      expect(parseServe([flag, String(LONGEST_TIMER_MS)])[key]).toBe(LONGEST_TIMER_MS);
      const longer = String(LONGEST_TIMER_MS + 1);
      expect(refusal([flag, longer]).message).toBe(
        `error: option '${flag} <ms>' argument '${longer}' is invalid. ` +
          `${flag} must be an integer from ${min} to ${LONGEST_TIMER_MS} in decimal digits, got "${longer}"`,
      );
      // 30 days, as one might set to all but switch a ping or a detach off
      expect(refusal([], { [env]: String(30 * 24 * 3600 * 1000) }).message).toContain(
        `from env '${env}' is invalid. ${flag} must be an integer from ${min} to ${LONGEST_TIMER_MS}`,
      );
      vi.unstubAllEnvs();
      expect(parseServe([flag, String(min)])[key]).toBe(min);
      expect(refusal([flag, String(min - 1)]).message).toContain(`from ${min} to ${LONGEST_TIMER_MS}`);
    }
  });
});

describe("serve's PostgreSQL connection check flags", () => {
  it("default to 5 s, read their variables, and refuse under 100 ms or past a timer's longest delay (the query check's handshake bound is twice it)", () => {
    expect(parseServe([])).toMatchObject({ dbListenCheckMs: 5000, dbQueryCheckMs: 5000 });
    expect(parseServe(["--db-listen-check-ms", "250", "--db-query-check-ms", "750"])).toMatchObject({
      dbListenCheckMs: 250,
      dbQueryCheckMs: 750,
    });
    expect(
      parseServe([], { SESSIONMUX_DB_LISTEN_CHECK_MS: "1000", SESSIONMUX_DB_QUERY_CHECK_MS: "2000" }),
    ).toMatchObject({ dbListenCheckMs: 1000, dbQueryCheckMs: 2000 });
    vi.unstubAllEnvs();
    for (const [flag, key, max] of [
      ["--db-listen-check-ms", "dbListenCheckMs", LONGEST_TIMER_MS],
      ["--db-query-check-ms", "dbQueryCheckMs", Math.floor(LONGEST_TIMER_MS / 2)],
    ] as const) {
      expect(parseServe([flag, "100"])[key]).toBe(100);
      expect(parseServe([flag, String(max)])[key]).toBe(max);
      expect(refusal([flag, "99"]).message).toBe(
        `error: option '${flag} <ms>' argument '99' is invalid. ` +
          `${flag} must be an integer from 100 to ${max} in decimal digits, got "99"`,
      );
      expect(refusal([flag, String(max + 1)]).message).toContain(`from 100 to ${max}`);
      expect(refusal([flag, "5s"]).message).toContain(`got "5s"`);
    }
  });
});
