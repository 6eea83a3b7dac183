import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import pg from "pg";
import { afterEach, describe, expect, inject, it, vi } from "vitest";
import { SessionHost } from "../../src/host/session-host.js";
import { createSessionmux } from "../../src/index.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { listen, mountedApp } from "./app-fixture.js";

const pgUrl = inject("pgUrl");
const cleanups = cleanupsAfterEach();
afterEach(() => vi.restoreAllMocks());

async function scrape(url: string, authorization: string): Promise<string> {
  const res = await fetch(url, { headers: { authorization } });
  expect(res.status).toBe(200);
  return res.text();
}

describe("a scrape of a mounted host's /metrics", () => {
  it("counts the live state once for its three gauges", async () => {
    const liveCounts = vi.spyOn(SessionHost.prototype, "liveCounts");
    const { mux, authority } = await mountedApp(cleanups);
    const client = mux.connect({ name: "alice", admin: false });
    cleanups.push(() => client.close());
    await client.create({ sessionId: "s" });
    liveCounts.mockClear();
    const text = await scrape(`http://${authority}/chat/metrics`, "Bearer user:root");
    expect(liveCounts).toHaveBeenCalledTimes(1);
    expect(text).toMatch(/^sessionmux_queued_prompts 0$/m);
    expect(text).toMatch(/^sessionmux_pending_interactions\{kind="question"\} 0$/m);
    expect(text).toMatch(/^sessionmux_running_jobs 0$/m);
    await scrape(`http://${authority}/chat/metrics`, "Bearer user:root");
    expect(liveCounts).toHaveBeenCalledTimes(2);
  });

  it.skipIf(!pgUrl)("reads the PostgreSQL pools once for the connection and waiting gauges", async () => {
    const schema = `embed_${randomBytes(5).toString("hex")}`;
    cleanups.push(async () => {
      const admin = new pg.Client({ connectionString: pgUrl! });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    });
    const poolStats = vi.spyOn(PostgresSessionStore.prototype, "poolStats");
    const mux = await createSessionmux({
      db: pgUrl!,
      dbSchema: schema,
      tokens: [{ name: "scraper", secret: "scrape-token", admin: true }],
    });
    cleanups.push(() => mux.close());
    const server = createServer();
    mux.attach(server);
    const authority = await listen(server);
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    poolStats.mockClear();
    const text = await scrape(`http://${authority}/metrics`, "Bearer scrape-token");
    expect(poolStats).toHaveBeenCalledTimes(1);
    for (const pool of ["reads", "writer", "inbox", "uploads", "readiness"]) {
      expect(text).toMatch(
        new RegExp(`^sessionmux_db_connections\\{pool="${pool}",state="busy"\\} \\d+$`, "m"),
      );
      expect(text).toMatch(new RegExp(`^sessionmux_db_waiting\\{pool="${pool}"\\} \\d+$`, "m"));
    }
  });
});
