import { randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { openHostDatabase } from "../../src/operations/host-database.js";
import { dropSchema, pgUrl } from "../store/contract/backends.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { startTcpProxy } from "../support/tcp-proxy.js";

/**
 * `queryCheckMs` of a host's database reaches the pools of the call inbox and the uploads
 * sweeper, not only the store's, and one check connection at a time serves them all: with the
 * questions swallowed (as over a path that went silent), a forwarded call's statement and an
 * upload quota's read, each waiting on a lock, are both failed, while never more than one check
 * connection is open.
 */

const cleanups = cleanupsAfterEach();

const checking = (opening: Buffer) => opening.includes("sessionmux-check");

describe.skipIf(!pgUrl)("a host database on PostgreSQL: its statement checks", () => {
  it("watches the call inbox's and the uploads sweeper's statements every queryCheckMs, over one check connection at a time", async () => {
    const url = new URL(pgUrl!);
    const proxy = await startTcpProxy(Number(url.port || 5432));
    cleanups.push(() => proxy.stop());
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const schema = `hostdb_checks_${randomBytes(4).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl!, schema));
    const database = await openHostDatabase({
      db: url.toString(),
      schema,
      hostId: "h1",
      metrics: { committed: () => undefined },
      listenCheckMs: 600_000,
      queryCheckMs: 300,
    });
    cleanups.push(() => database.close());

    const admin = new pg.Client({ connectionString: pgUrl! });
    await admin.connect();
    cleanups.push(() => admin.end());
    await admin.query("BEGIN");
    await admin.query(
      `LOCK TABLE "${schema}".forwarded_calls, "${schema}".attachments IN ACCESS EXCLUSIVE MODE`,
    );
    proxy.silenceNew(checking);
    let mostAtOnce = 0;
    const sample = setInterval(() => {
      mostAtOnce = Math.max(mostAtOnce, proxy.silenced);
    }, 50);
    cleanups.push(() => clearInterval(sample));
    const outcomes: Record<string, string> = {};
    const settle = (name: string, done: Promise<unknown>) =>
      done.then(
        () => {
          outcomes[name] = "answered";
        },
        () => {
          outcomes[name] = "failed";
        },
      );
    settle(
      "forward",
      database.shared!.inbox.send(
        "h2",
        {
          callId: randomUUID(),
          fromHost: "h1",
          sessionId: "s1",
          principal: { name: "alice", admin: false },
          method: "session.cancel",
          params: { sessionId: "s1" },
        },
        600_000,
      ),
    );
    settle("upload quota", database.uploads.pendingBytes("alice"));
    await expect
      .poll(() => outcomes, { timeout: 4_000 })
      .toEqual({ forward: "failed", "upload quota": "failed" });
    clearInterval(sample);
    expect(mostAtOnce).toBe(1);

    proxy.silenceNew();
    await admin.query("COMMIT");
    expect(await database.uploads.pendingBytes("alice")).toBe(0);
  });
});
