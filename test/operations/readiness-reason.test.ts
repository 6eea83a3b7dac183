import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { pgReadyCheck } from "../../src/operations/pg-ready-check.js";
import { ReadinessProbe } from "../../src/operations/readiness-probe.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { readinessHost } from "../support/readiness-host.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";

/**
 * `/readyz` needs no token: a failing database answers a stable reason and code, and its own
 * error (an address, a file, the server's words) goes to the log, once per change of state.
 */

const cleanups = cleanupsAfterEach();

describe("a readiness check that fails", () => {
  it("answers db_unavailable without the PostgreSQL error, logged once while it keeps failing", async () => {
    const unreachable = pgReadyCheck("postgres://postgres@127.0.0.1:1/test", 1_000);
    cleanups.push(() => unreachable.close());
    const { logger, lines } = capturedLogger();
    let checks = 0;
    const probe = new ReadinessProbe(
      () => {
        checks++;
        return unreachable.check();
      },
      5,
      Date.now,
      logger,
    );
    cleanups.push(() => probe.stop());
    await probe.start();
    await until(() => checks >= 4, 10_000, "several failed checks");
    const answer = JSON.stringify(probe.current());
    expect(probe.current()).toMatchObject({
      ready: false,
      code: "db_unavailable",
      reason: "database unavailable",
    });
    expect(answer).not.toContain("ECONNREFUSED");
    expect(answer).not.toContain("127.0.0.1");
    const warnings = lines.filter((l) => l.level === 40);
    expect(warnings).toHaveLength(1);
    expect(JSON.stringify(warnings[0])).toContain("ECONNREFUSED");
  });

  it("on a SQLite file whose write lock another connection holds: /readyz 503 without SQLite's words or the path", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    const { logger, lines } = capturedLogger();
    const { readyz } = await readinessHost(db, cleanups, { logger });
    expect((await fetch(readyz)).status).toBe(200);

    const holder = new Database(db);
    cleanups.push(() => {
      if (holder.inTransaction) holder.exec("ROLLBACK");
      holder.close();
    });
    holder.exec("BEGIN IMMEDIATE");
    const refused = await until(
      async () => {
        const res = await fetch(readyz);
        return res.status === 503 ? await res.text() : undefined;
      },
      15_000,
      "/readyz 503",
    );
    expect(JSON.parse(refused)).toMatchObject({
      ready: false,
      code: "db_unavailable",
      reason: "database unavailable",
    });
    expect(refused).not.toMatch(/locked|SQLITE/i);
    expect(refused).not.toContain(dir.path);
    const failed = lines.filter((l) => l.level === 40 && l.msg === "readiness check failed: not ready");
    expect(failed).toHaveLength(1);
    expect(JSON.stringify(failed[0])).toContain("database is locked");

    holder.exec("ROLLBACK");
    await until(async () => (await fetch(readyz)).status === 200, 15_000, "/readyz 200 again");
    expect(lines.filter((l) => l.msg === "readiness check passes again: ready")).toHaveLength(1);
  });
});
