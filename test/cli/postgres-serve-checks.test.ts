import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { dropSchema, pgUrl } from "../store/contract/backends.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { startServe } from "./run-cli.js";

/**
 * `--db-listen-check-ms` and `--db-query-check-ms` reach the connections they set: the host
 * reaches the database through a TCP proxy that reads what each connection sends, named by the
 * `application_name` of its startup message. At the default 5 s neither count below is reached
 * within the polls' time.
 */

const cleanups = cleanupsAfterEach();

describe.skipIf(!pgUrl)("sessionmux serve's PostgreSQL connection checks", { timeout: 120_000 }, () => {
  it("asks each LISTEN connection SELECT 1 every --db-listen-check-ms, and checks a waiting read every --db-query-check-ms", async () => {
    const asked = new Map<string, number>();
    const count = (name: string) => asked.get(name) ?? 0;
    const url = new URL(pgUrl!);
    const proxy = await startTcpProxy(Number(url.port || 5432), {
      tap: () => {
        let name: string | undefined;
        return {
          fromClient(chunk) {
            if (name === undefined) {
              name = /application_name\0([^\0]*)\0/.exec(chunk.toString("latin1"))?.[1] ?? "";
              if (name === "sessionmux-check") asked.set(name, count(name) + 1);
            } else if (chunk.includes("SELECT 1\0")) asked.set(name, count(name) + 1);
          },
          fromHost() {},
        };
      },
    });
    cleanups.push(() => proxy.stop());
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const schema = `serve_checks_${randomBytes(4).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl!, schema));
    const host = await startServe([
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--db",
      url.toString(),
      "--db-schema",
      schema,
      "--token",
      "t1",
      "--db-listen-check-ms",
      "200",
      "--db-query-check-ms",
      "300",
    ]);
    if (host.exited !== undefined) throw new Error(`serve exited ${host.exited}: ${host.stderr}`);
    cleanups.push(async () => {
      await host.stop();
    });
    const httpUrl = /listening on (\S+)/.exec(host.stdout)?.[1];

    // the commit feed's LISTEN connection and the call inbox's
    await expect.poll(() => count("sessionmux-feed"), { timeout: 4_000 }).toBeGreaterThanOrEqual(3);
    await expect.poll(() => count("sessionmux-calls"), { timeout: 4_000 }).toBeGreaterThanOrEqual(3);

    // a read of the sessions' list waits on a lock another transaction holds: checked, left to wait
    const admin = new pg.Client({ connectionString: pgUrl! });
    await admin.connect();
    cleanups.push(() => admin.end());
    await admin.query("BEGIN");
    await admin.query(`LOCK TABLE "${schema}".projections IN ACCESS EXCLUSIVE MODE`);
    const listed = fetch(`${httpUrl}/api/chat/sessions`, { headers: { authorization: "Bearer t1" } });
    await expect
      .poll(() => count("sessionmux-check"), { timeout: 4_000, interval: 50 })
      .toBeGreaterThanOrEqual(3);
    await admin.query("COMMIT");
    expect((await listed).status).toBe(200);
  });
});
