import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chownSync, mkdtempSync, rmdirSync, statfsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { type ScratchDatabase, scratchDatabase } from "../store/postgres/scratch-database.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { MuxPeer } from "../support/mux-peer.js";
import { readinessHost } from "../support/readiness-host.js";
import { mountTmpfs, remount } from "../support/tmpfs.js";
import { until } from "../support/until.js";

/**
 * `/readyz` on PostgreSQL while the store's writes fail on storage. A database of the test's own
 * turned read-only (`default_transaction_read_only`, taken by every connection made after it, so
 * the test ends the ones open) refuses every write 25006, as a server out of disk refuses them
 * 53100, while reads and the server's own check still pass.
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const MAX_RENAMES = 50;

/** A host on `db` checking readiness every 50 ms, ready, that nobody has written to. */
async function idleHost(db: string): Promise<{ readyz: string; port: number }> {
  const host = await readinessHost(db, cleanups);
  await until(async () => (await fetch(host.readyz)).status === 200, 15_000, "/readyz 200");
  return host;
}

/** `idleHost` with a peer that created session `full`. */
async function readyHost(db: string): Promise<{ readyz: string; peer: MuxPeer }> {
  const { readyz, port } = await idleHost(db);
  const peer = await MuxPeer.connect(`ws://127.0.0.1:${port}/api/remote.mux`, { token: "s" });
  cleanups.push(() => peer.ws.terminate());
  await peer.call("session.create", { sessionId: "full" });
  return { readyz, peer };
}

/**
 * `/readyz`'s body once it answers 503 with a code other than `db_unavailable` or `check_stale`
 * (a check that waits on a write committing, on a loaded machine, outlasts three checks of 50 ms).
 */
async function writesFailing(readyz: string): Promise<Record<string, unknown>> {
  return until(
    async () => {
      const res = await fetch(readyz);
      const body = res.status === 503 ? ((await res.json()) as Record<string, unknown>) : undefined;
      return body?.code === "db_unavailable" || body?.code === "check_stale" ? undefined : body;
    },
    15_000,
    "/readyz 503",
  );
}

/**
 * A database of the test's own whose tables are made in a tablespace on an 8 MiB tmpfs of its own
 * (only root may mount one), dropped after the test; or why there is none here.
 */
async function smallDisk(): Promise<{ mount: string; scratch: ScratchDatabase } | string> {
  const mount = mkdtempSync(join(tmpdir(), "sessionmux-pg-disk-"));
  cleanups.push(() => rmdirSync(mount));
  if (!mountTmpfs(mount, "size=8m,mode=0700", cleanups)) return "no tmpfs may be mounted here";
  let owner: number;
  try {
    owner = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  } catch {
    return "the PostgreSQL server runs on no local account";
  }
  chownSync(mount, owner, owner);
  // dropped after the database that uses it (cleanups run last first)
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  cleanups.push(() => admin.end());
  const space = `ready_disk_${randomBytes(4).toString("hex")}`;
  // a server on another machine (or in a container) sees no such folder
  const created = await admin.query(`CREATE TABLESPACE "${space}" LOCATION '${mount}'`).then(
    () => true,
    () => false,
  );
  if (!created) return "the PostgreSQL server cannot use a folder of this machine";
  cleanups.push(async () => {
    await admin.query(`DROP TABLESPACE IF EXISTS "${space}"`);
  });
  const scratch = await scratchDatabase(pgUrl, "ready_disk");
  cleanups.push(() => scratch.drop());
  // every table of the store is made in it, as the host migrates the new database
  await scratch.server.query(`ALTER DATABASE "${scratch.name}" SET default_tablespace = "${space}"`);
  return { mount, scratch };
}

/** A connection to `url`, ended after the test. */
async function connected(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanups.push(() => client.end());
  return client;
}

describe.skipIf(!pgUrl)("/readyz on PostgreSQL while the store's writes fail", () => {
  it("answers 503 store_writes_failing, and 200 again once the database takes writes, with no client writing", async () => {
    const scratch = await scratchDatabase(pgUrl, "ready_writes");
    cleanups.push(() => scratch.drop());
    const reconnectAll = () =>
      scratch.server.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [
        scratch.name,
      ]);
    const { readyz, peer } = await readyHost(scratch.url);

    await scratch.server.query(`ALTER DATABASE "${scratch.name}" SET default_transaction_read_only = on`);
    await reconnectAll();
    // the first write may meet the ended connection; the ones after it the read-only database
    let refused: SessionmuxError | undefined;
    for (
      let i = 0;
      i < MAX_RENAMES && (refused?.data as { postgres?: string } | undefined)?.postgres !== "25006";
      i++
    ) {
      await peer.call("session.rename", { sessionId: "full", title: `${i}` }).catch((err) => {
        if (!(err instanceof SessionmuxError)) throw err;
        refused = err;
      });
    }
    expect(refused?.code).toBe("persistence_failure");
    expect(refused?.data).toEqual({ postgres: "25006" });

    // the readiness check's own connection, ended too, may answer db_unavailable once before
    const notReady = await writesFailing(readyz);
    expect(notReady).toMatchObject({
      ready: false,
      code: "store_writes_failing",
      reason: "store writes failing",
    });
    // still refused while nothing has changed: the host's own write attempts keep failing
    expect((await fetch(readyz)).status).toBe(503);
    // reads still work: only writes fail
    expect(await peer.call("session.list", {})).toBeDefined();

    await scratch.server.query(`ALTER DATABASE "${scratch.name}" RESET default_transaction_read_only`);
    await reconnectAll();
    await until(async () => (await fetch(readyz)).status === 200, 15_000, "/readyz 200 again");
    await peer.call("session.rename", { sessionId: "full", title: "writable again" });
    // the host's own write attempts left no row behind
    const reader = new pg.Client({ connectionString: scratch.url });
    await reader.connect();
    try {
      const { rows } = await reader.query("SELECT count(*)::int AS n FROM prompt_keys WHERE session_id = ''");
      expect(rows).toEqual([{ n: 0 }]);
    } finally {
      await reader.end();
    }
  }, 120_000);
  // A real full disk needs a file system of its own for the server to fill: a tablespace on a
  // small tmpfs, which only root may mount (the server's WAL stays where it was).
  it.runIf(process.getuid?.() === 0)(
    "answers 503 store_writes_failing while the server's disk is full (53100), and 200 once it has room",
    async (ctx) => {
      const disk = await smallDisk();
      if (typeof disk === "string") return ctx.skip(disk);
      const { mount, scratch } = disk;
      const { readyz, peer } = await readyHost(scratch.url);
      const { blocks, bfree, bsize } = statfsSync(mount);
      const room = (size: number) => remount(mount, `size=${size}`);
      room((blocks - bfree) * bsize + 256 * 1024);

      let refused: SessionmuxError | undefined;
      for (
        let i = 0;
        i < 5_000 && (refused?.data as { postgres?: string } | undefined)?.postgres !== "53100";
        i++
      ) {
        await peer
          .call("session.rename", { sessionId: "full", title: `${i} ${"x".repeat(500)}` })
          .catch((err) => {
            if (!(err instanceof SessionmuxError)) throw err;
            refused = err;
          });
      }
      expect(refused?.code).toBe("persistence_failure");
      expect(refused?.data).toEqual({ postgres: "53100" });
      expect(await writesFailing(readyz)).toMatchObject({ ready: false, code: "store_writes_failing" });
      expect((await fetch(readyz)).status).toBe(503);

      room(64 * 1024 * 1024);
      await until(async () => (await fetch(readyz)).status === 200, 15_000, "/readyz 200 again");
      await peer.call("session.rename", { sessionId: "full", title: "room again" });
    },
    120_000,
  );

  it("answers 503 store_writes_failing for a database turned read-only though the host tried no write, and 200 once it takes writes", async () => {
    const scratch = await scratchDatabase(pgUrl, "ready_idle");
    cleanups.push(() => scratch.drop());
    const reconnectAll = () =>
      scratch.server.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [
        scratch.name,
      ]);
    const { readyz } = await idleHost(scratch.url);

    // nobody writes: only the host's own checks can tell
    await scratch.server.query(`ALTER DATABASE "${scratch.name}" SET default_transaction_read_only = on`);
    await reconnectAll();
    expect(await writesFailing(readyz)).toMatchObject({ ready: false, code: "store_writes_failing" });

    await scratch.server.query(`ALTER DATABASE "${scratch.name}" RESET default_transaction_read_only`);
    await reconnectAll();
    await until(async () => (await fetch(readyz)).status === 200, 15_000, "/readyz 200 again");
    const reader = await connected(scratch.url);
    const { rows } = await reader.query("SELECT count(*)::int AS n FROM prompt_keys WHERE session_id = ''");
    expect(rows).toEqual([{ n: 0 }]);
  }, 120_000);

  it.runIf(process.getuid?.() === 0)(
    "answers 503 store_writes_failing once another client filled the store's disk though the host tried no write, and 200 once it has room",
    async (ctx) => {
      const disk = await smallDisk();
      if (typeof disk === "string") return ctx.skip(disk);
      const { readyz } = await idleHost(disk.scratch.url);

      // another client fills the tablespace (rows under 2 KB are stored as they are)
      const filler = await connected(disk.scratch.url);
      await filler.query("CREATE TABLE filler (v text)");
      await expect(
        filler.query("INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 100000)"),
      ).rejects.toMatchObject({ code: "53100" });
      expect(await writesFailing(readyz)).toMatchObject({ ready: false, code: "store_writes_failing" });

      await filler.query("DROP TABLE filler");
      await until(async () => (await fetch(readyz)).status === 200, 15_000, "/readyz 200 again");
    },
    120_000,
  );
});
