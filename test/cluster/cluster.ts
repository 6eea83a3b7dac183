import { randomBytes } from "node:crypto";
import pg from "pg";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { readWholeLog } from "../support/whole-log.js";
import { type ServeProcess, spawnServe } from "./serve-process.js";

export const CLUSTER_TOKEN = "cluster-admin-token";

/** A lease short enough for takeovers to happen within a test, long enough to renew on a loaded machine. */
export const TEST_LEASE_TTL_MS = 2_000;

export interface Cluster {
  readonly url: string;
  readonly schema: string;
  /** The hosts in start order: A, B, C. */
  readonly hosts: ServeProcess[];
  /** A store instance on the same schema, for reading the log as PostgreSQL holds it. */
  readonly reader: PostgresSessionStore;
  /** Seqs of `sessionId`'s log, in order. */
  logSeqs(sessionId: string): Promise<number[]>;
  /** Stops every host (kill -9 of whatever is left), closes the reader and drops the schema. */
  dispose(): Promise<void>;
}

/**
 * `count` real `sessionmux serve` processes on one PostgreSQL schema of their own (random name,
 * dropped at the end), started at once so they also race to create it.
 */
export async function startCluster(
  url: string,
  options: { count?: number; leaseTtlMs?: number; args?: string[] } = {},
): Promise<Cluster> {
  const schema = `cluster_${randomBytes(5).toString("hex")}`;
  const names = ["a", "b", "c", "d", "e"].slice(0, options.count ?? 3);
  const started = await Promise.allSettled(
    names.map((name) =>
      spawnServe({
        db: url,
        hostId: `host-${name}`,
        token: CLUSTER_TOKEN,
        args: [
          "--db-schema",
          schema,
          "--db-pool-size",
          "4",
          "--lease-ttl-ms",
          String(options.leaseTtlMs ?? TEST_LEASE_TTL_MS),
          "--log-level",
          "info",
          ...(options.args ?? []),
        ],
      }),
    ),
  );
  const hosts = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const failed = started.find((s) => s.status === "rejected");
  if (failed) {
    await Promise.all(hosts.map((h) => h.kill9()));
    await dropSchema(url, schema);
    throw (failed as PromiseRejectedResult).reason;
  }
  const reader = await PostgresSessionStore.open(url, { schema, maxConnections: 2 });
  return {
    url,
    schema,
    hosts,
    reader,
    async logSeqs(sessionId) {
      const read = await readWholeLog(reader, sessionId);
      return read.status === "ok" ? read.events.map((event) => event.seq) : [];
    },
    async dispose() {
      await Promise.all(hosts.map((h) => h.stop(5_000)));
      await reader.close();
      await dropSchema(url, schema);
    },
  };
}

async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** 1..n */
export function oneTo(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

/** The first three hosts, named. */
export function threeHosts(cluster: Cluster): [ServeProcess, ServeProcess, ServeProcess] {
  const [a, b, c] = cluster.hosts;
  if (!a || !b || !c) throw new Error("the cluster has fewer than three hosts");
  return [a, b, c];
}

/** Three processes starting on two shared cores take a while; every wait inside is bounded too. */
export const CLUSTER_TEST_TIMEOUT_MS = 300_000;
