import { describe, expect, it } from "vitest";
import { NotReadyReasons, notReady } from "../../protocol/readiness.js";

/**
 * The body of a `503` from `GET /readyz` (protocol-v1 §9): `ready` false, when the host last
 * checked, and a `code` of five with its fixed words as `reason`.
 */
describe("notReady", () => {
  it("answers each code with its fixed words and the time of the last check", () => {
    expect(notReady("not_checked", 0)).toStrictEqual({
      ready: false,
      checkedAt: 0,
      reason: "not checked yet",
      code: "not_checked",
    });
    expect(notReady("db_unavailable", 1_700_000_000_000)).toStrictEqual({
      ready: false,
      checkedAt: 1_700_000_000_000,
      reason: "database unavailable",
      code: "db_unavailable",
    });
    expect(notReady("check_stale", 5)).toStrictEqual({
      ready: false,
      checkedAt: 5,
      reason: "last check is stale",
      code: "check_stale",
    });
    expect(notReady("shutting_down", 6)).toStrictEqual({
      ready: false,
      checkedAt: 6,
      reason: "shutting down",
      code: "shutting_down",
    });
    expect(notReady("store_writes_failing", 7)).toStrictEqual({
      ready: false,
      checkedAt: 7,
      reason: "store writes failing",
      code: "store_writes_failing",
    });
  });

  it("knows exactly the six codes of §9", () => {
    expect(Object.keys(NotReadyReasons).sort()).toEqual(
      [
        "build_outdated",
        "check_stale",
        "db_unavailable",
        "not_checked",
        "shutting_down",
        "store_writes_failing",
      ].sort(),
    );
  });
});
