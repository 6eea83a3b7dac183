import { randomBytes, randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { afterEach, inject, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import type { AgentDriver } from "../../src/agents/agent.js";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import { ADMIN, type Principal } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { PgCallInbox } from "../../src/store/postgres/pg-call-inbox.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { HostMetrics } from "../../src/transport/metrics.js";
import { dropSchema } from "../store/contract/backends.js";
import { gate } from "../support/gate.js";
import { readWholeLog } from "../support/whole-log.js";
import { beforeAppend } from "./host-fixture.js";

/** The PostgreSQL of this run, or null (the global setup said so, and fails under CI=true). */
export const pgUrl = inject("pgUrl");

export const ALICE: Principal = { name: "alice", admin: false };

/** A prompt with a fresh client message id: each is a new prompt, never a retry of another. */
export const prompt = (text: string) => ({ clientMessageId: randomUUID(), text });

/** A lease short enough that a stopped host's runs out within a test, long enough for a noisy machine. */
export const SHORT_LEASE_TTL_MS = 2_000;

/** A forward wait no test outlives: a call settles by its owner's lease or not at all. */
export const UNREACHED_FORWARD_WAIT_MS = 10 * 60_000;
export { ADMIN };

export interface ClusterHost {
  id: string;
  host: SessionHost;
  store: PostgresSessionStore;
  inbox: PgCallInbox;
}

export interface Cluster {
  schema: string;
  hosts: ClusterHost[];
  /** Starts one more host on the same schema (as a new process would). */
  addHost(): Promise<ClusterHost>;
  dispose(): Promise<void>;
}

/** How `openCluster` makes its hosts; each is a host's default when left out. */
export interface ClusterOptions {
  leaseTtlMs?: number;
  logger?: (hostId: string) => Logger;
  /** Each host's agent; the demo agent by default. */
  agent?: (hostId: string) => AgentDriver;
  metrics?: (hostId: string) => HostMetrics;
  /** How long each host waits on a forwarded call before resolving the owner again. */
  forwardTimeoutMs?: number;
  /** How long in all each host waits on a forwarded call its owner claimed (the inbox's `claimedWaitMs`). */
  claimedWaitMs?: number;
  /**
   * A schema the test made and drops itself, with its tables in place, and the database as each
   * host connects to it (so one host's role can be refused while the others go on).
   */
  on?: { schema: string; url: (hostId: string) => string };
}

/** `count` SessionHosts in this process, each with its own store and inbox on one fresh schema. */
export async function openCluster(count: number, options: ClusterOptions = {}): Promise<Cluster> {
  if (!pgUrl) throw new Error("no PostgreSQL");
  const url = pgUrl;
  const schema = options.on?.schema ?? `mh_${randomBytes(5).toString("hex")}`;
  const urlOf = options.on?.url ?? (() => url);
  const hosts: ClusterHost[] = [];
  const addHost = async () => {
    const id = `host-${String.fromCharCode(97 + hosts.length)}`;
    const store = await PostgresSessionStore.open(urlOf(id), { schema, hostId: id, maxConnections: 4 });
    const inbox = await PgCallInbox.open(urlOf(id), {
      schema,
      pollMs: 250,
      ...(options.claimedWaitMs ? { claimedWaitMs: options.claimedWaitMs } : {}),
    });
    const logger = options.logger?.(id);
    const metrics = options.metrics?.(id);
    const host = new SessionHost({
      store,
      agent: options.agent?.(id) ?? new DemoAgent(),
      hostId: id,
      ...(logger ? { logger } : {}),
      ...(metrics ? { metrics } : {}),
      cluster: {
        inbox,
        ...(options.leaseTtlMs ? { leaseTtlMs: options.leaseTtlMs } : {}),
        ...(options.forwardTimeoutMs ? { forwardTimeoutMs: options.forwardTimeoutMs } : {}),
      },
    });
    await host.start();
    const added = { id, host, store, inbox };
    hosts.push(added);
    return added;
  };
  for (let i = 0; i < count; i++) await addHost();
  return {
    schema,
    hosts,
    addHost,
    async dispose() {
      for (const h of hosts) await h.host.shutdown();
      for (const h of hosts) {
        await h.inbox.close();
        await h.store.close();
      }
      if (!options.on) await dropSchema(url, schema);
    },
  };
}

export async function readLog(store: PostgresSessionStore, sessionId: string): Promise<SessionEvent[]> {
  const outcome = await readWholeLog(store, sessionId);
  if (outcome.status !== "ok") throw new Error(`log of ${sessionId}: ${outcome.status}`);
  return outcome.events;
}

/** Waits for the turn's `turn/end` and returns its state. */
export function turnEnd(store: PostgresSessionStore, sessionId: string, turnId: string): Promise<string> {
  return vi.waitFor(
    async () => {
      const end = (await readLog(store, sessionId)).find(
        (e) => e.type === "turn/end" && e.data.turnId === turnId,
      );
      if (end?.type !== "turn/end") throw new Error("turn still open");
      return end.data.state;
    },
    { timeout: 20_000, interval: 25 },
  );
}

export async function createSession(host: SessionHost): Promise<string> {
  const { header } = await host.call(ALICE, "session.create", {});
  return header.sessionId;
}

/** `metrics` of their own for the host `hostId`, fresh ones for every other (`of`, as `openCluster`'s `metrics`). */
export function metricsFor(hostId: string): { metrics: HostMetrics; of: (id: string) => HostMetrics } {
  const metrics = new HostMetrics();
  return { metrics, of: (id) => (id === hostId ? metrics : new HostMetrics()) };
}

/**
 * The calls a host forwarded, counted by outcome: its `sessionmux_forwarded_calls_total` lines
 * that counted one (every outcome is served from 0).
 */
export async function forwardedCalls(metrics: HostMetrics): Promise<string[]> {
  return (await metrics.registry.metrics())
    .split("\n")
    .filter((line) => line.startsWith("sessionmux_forwarded_calls_total") && !line.endsWith(" 0"));
}

/**
 * Holds the next turn `store` opens: `taken` once its `turn/start` is about to be written, which
 * waits until `release()`.
 */
export function holdTurnStart(store: PostgresSessionStore): { taken: Promise<void>; release: () => void } {
  const taken = gate();
  const held = gate();
  beforeAppend(
    store,
    (events) => events[0]?.type === "turn/start",
    async () => {
      taken.open();
      await held.promise;
    },
  );
  return { taken: taken.promise, release: () => held.open() };
}

/** The error `call` rejects with (undefined if it succeeds), its rejection handled at once. */
export function refusal(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (err: unknown) => err,
  );
}

/** Two hosts, B's metrics its own, and a new session A owns. */
export interface OwnedOnA {
  cluster: Cluster;
  a: ClusterHost;
  b: ClusterHost;
  /** B's metrics. */
  metrics: HostMetrics;
  sessionId: string;
}

/**
 * One cluster per test, disposed after it with every spy restored first (a spy that holds a
 * statement would hold the disposal's too).
 */
export function clusterEachTest(): {
  open(count: number, options?: ClusterOptions): Promise<Cluster>;
  ownedOnA(options?: Omit<ClusterOptions, "metrics">): Promise<OwnedOnA>;
} {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await cluster?.dispose();
    cluster = undefined;
  });
  const open = async (count: number, options?: ClusterOptions) => {
    cluster = await openCluster(count, options);
    return cluster;
  };
  return {
    open,
    async ownedOnA(options = {}) {
      const { metrics, of } = metricsFor("host-b");
      const opened = await open(2, { ...options, metrics: of });
      const [a, b] = opened.hosts as [ClusterHost, ClusterHost];
      return { cluster: opened, a, b, metrics, sessionId: await createSession(a.host) };
    },
  };
}
