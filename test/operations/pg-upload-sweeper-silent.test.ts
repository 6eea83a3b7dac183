import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { pgUploadSweeper } from "../../src/operations/pg-upload-sweeper.js";
import { queryWatch } from "../../src/store/postgres/pg-backend-watch.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { dropSchema, pgUrl } from "../store/contract/backends.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { startTcpProxy } from "../support/tcp-proxy.js";

/**
 * The uploads sweeper's one connection, whose network path goes silent: an upload's quota read
 * over it waited for as long as TCP retransmits (over the proxy, for ever), and held the upload
 * meanwhile. Its pool is watched as the store's reads are (`pg-read-silent.test.ts`).
 */

const cleanups = cleanupsAfterEach();

const pooled = (opening: Buffer) => opening.includes("application_name\0sessionmux\0");

describe.skipIf(!pgUrl)("PostgreSQL uploads sweeper whose connection goes silent", () => {
  it("fails a read whose answer is lost, and one whose new connection's handshake is swallowed; the next read answers", async () => {
    const schema = `sweeper_silent_${randomBytes(4).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl!, schema));
    const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 1 });
    cleanups.push(() => store.close());
    await store.putAttachment({ owner: "alice", name: "f", type: "t", bytes: new Uint8Array(10) });
    const url = new URL(pgUrl!);
    const proxy = await startTcpProxy(Number(url.port || 5432));
    cleanups.push(() => proxy.stop());
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const sweeper = pgUploadSweeper(url.toString(), schema, queryWatch(url.toString(), 300));
    cleanups.push(() => sweeper.close());
    expect(await sweeper.pendingBytes("alice")).toBe(4096);

    proxy.silenceNew(pooled);
    expect(proxy.silenceAll(pooled)).toBe(1);
    const failures: string[] = [];
    for (let read = 0; read < 2; read++) {
      let settled: { error: Error } | { bytes: number } | undefined;
      sweeper.pendingBytes("alice").then(
        (bytes) => {
          settled = { bytes };
        },
        (error: Error) => {
          settled = { error };
        },
      );
      await expect.poll(() => settled, { timeout: 20_000 }).toBeDefined();
      expect(settled).toHaveProperty("error");
      failures.push((settled as { error: Error }).error.message);
    }
    // the statement on the silenced connection, then the handshake of the one made in its place
    expect(failures).toEqual([
      expect.stringMatching(/connection terminated/i),
      expect.stringMatching(/timeout/i),
    ]);
    await expect.poll(() => proxy.silenced, { timeout: 20_000 }).toBe(0);

    proxy.silenceNew();
    expect(await sweeper.pendingBytes("alice")).toBe(4096);
  }, 60_000);
});
