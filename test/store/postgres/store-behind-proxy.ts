import { randomBytes } from "node:crypto";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { Cleanup } from "../../support/cleanups.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";
import { dropSchema, pgUrl } from "../contract/backends.js";

export interface StoreBehindProxy {
  store: PostgresSessionStore;
  proxy: TcpProxy;
  schema: string;
  /** The checks of waiting connections made so far (connections named `sessionmux-check`). */
  checks(): number;
  /**
   * Cuts every connection at the server's next answer to COMMIT (CommandComplete "COMMIT"), before
   * it is passed on: the transaction committed, and its connection is lost before the store reads
   * that it did.
   */
  cutNextCommitAnswer(): void;
  /** The connections the COMMIT cut closed (0 until it happened). */
  cutAtCommit(): number;
}

/**
 * A PostgreSQL store in a schema of its own (`<prefix>_<random>`) reaching the database through a
 * TCP proxy the test can silence, checking its waiting connections every 300 ms unless `checks`
 * says otherwise; everything is stopped and dropped by `cleanups`.
 */
export async function openStoreBehindProxy(
  cleanups: Cleanup[],
  prefix: string,
  checks: { listenCheckMs?: number; queryCheckMs?: number } = {},
): Promise<StoreBehindProxy> {
  const url = new URL(pgUrl!);
  let checksMade = 0;
  let commitArmed = false;
  let cutAtCommit = 0;
  const proxy = await startTcpProxy(Number(url.port || 5432), {
    tap: () => {
      let first = true;
      return {
        fromClient(chunk) {
          if (first && chunk.includes("sessionmux-check")) checksMade += 1;
          first = false;
        },
        fromHost(chunk) {
          if (commitArmed && chunk.includes("COMMIT\0")) {
            commitArmed = false;
            cutAtCommit = proxy.cutAll();
          }
        },
      };
    },
  });
  cleanups.push(() => proxy.stop());
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  const schema = `${prefix}_${randomBytes(4).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl!, schema));
  const store = await PostgresSessionStore.open(url.toString(), {
    schema,
    maxConnections: 2,
    queryCheckMs: 300,
    ...checks,
  });
  cleanups.push(() => store.close().catch(() => undefined));
  return {
    store,
    proxy,
    schema,
    checks: () => checksMade,
    cutNextCommitAnswer: () => {
      commitArmed = true;
    },
    cutAtCommit: () => cutAtCommit,
  };
}
