import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { FORWARD_METRICS, type HostMeters, LEASE_LOSSES, type LeaseLoss } from "../host/host-meters.js";
import type { LiveCounts } from "../host/live/live-registry.js";
import type { TurnMeters } from "../host/turn-meters.js";
import type { PoolStats, StoreMetrics } from "../store/store-metrics.js";
import { HEARTBEAT_DROPS } from "./mux/heartbeat.js";

/** The codes of `sessionmux_refused_total` (README, "Operations"), each served from the first scrape on. */
const REFUSED_CODES = ["unauthorized", "forbidden_origin", "overloaded", "too_many_connections"] as const;

/** Prometheus metrics of one host (served at GET /metrics). One registry per host instance. */
export class HostMetrics implements StoreMetrics, HostMeters, TurnMeters {
  readonly registry = new Registry();
  readonly #hostInfo = new Gauge({
    name: "sessionmux_host_info",
    help: "This host's id (1 while it runs): tells the hosts sharing one database apart",
    labelNames: ["host_id"] as const,
    registers: [this.registry],
  });
  readonly connections = new Gauge({
    name: "sessionmux_connections",
    help: "Open mux sockets",
    registers: [this.registry],
  });
  readonly openStreams = new Gauge({
    name: "sessionmux_open_streams",
    help: "Open logical streams by method",
    labelNames: ["method"] as const,
    registers: [this.registry],
  });
  readonly framesIn = new Counter({
    name: "sessionmux_frames_in_total",
    help: "Frames received",
    registers: [this.registry],
  });
  readonly framesOut = new Counter({
    name: "sessionmux_frames_out_total",
    help: "Frames sent",
    registers: [this.registry],
  });
  readonly bytesIn = new Counter({
    name: "sessionmux_bytes_in_total",
    help: "Bytes received",
    registers: [this.registry],
  });
  readonly bytesOut = new Counter({
    name: "sessionmux_bytes_out_total",
    help: "Bytes sent",
    registers: [this.registry],
  });
  readonly appends = new Counter({
    name: "sessionmux_appends_total",
    help: "Events appended",
    registers: [this.registry],
  });
  readonly commitSeconds = new Histogram({
    name: "sessionmux_commit_seconds",
    help: "Group-commit transaction latency",
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly followerLag = new Histogram({
    name: "sessionmux_follower_lag_events",
    help: "Events a follower was behind the head when served from the log",
    buckets: [0, 1, 10, 100, 1000, 10000, 100000],
    registers: [this.registry],
  });
  readonly followContinuations = new Counter({
    name: "sessionmux_follow_continuations_total",
    help: "Commits buffered during a follower's log read: sent (buffered), already in the read (overlap), or not continuing it so the log was read again (gap)",
    labelNames: ["path"] as const,
    registers: [this.registry],
  });
  readonly slowFollowers = new Gauge({
    name: "sessionmux_slow_followers",
    help: "Followers paused above the high-water mark",
    registers: [this.registry],
  });
  readonly heartbeatDrops = new Counter({
    name: "sessionmux_heartbeat_drops_total",
    help: "Mux sockets the heartbeat dropped: silent (owed nothing, no answer to a ping) or stalled (a backlog owed, nothing taken from it for the grace intervals)",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly notificationsDropped = new Counter({
    name: "sessionmux_notifications_dropped_total",
    help: "Notifications not sent to a socket whose backlog was above its high-water mark",
    registers: [this.registry],
  });
  readonly listenerFailures = new Counter({
    name: "sessionmux_commit_listener_failures_total",
    help: "Exceptions thrown by commit listeners (delivery to the others went on)",
    registers: [this.registry],
  });
  readonly agentsLiveGauge = new Gauge({
    name: "sessionmux_agents_live",
    help: "Live agents",
    registers: [this.registry],
  });
  readonly leasesHeldGauge = new Gauge({
    name: "sessionmux_leases_held",
    help: "Session leases this host holds (hosts sharing a database): the agents it may run",
    registers: [this.registry],
  });
  readonly leaseTakeovers = new Counter({
    name: "sessionmux_lease_takeovers_total",
    help: "Session leases taken from a host whose lease had run out (its running turn closed interrupted)",
    registers: [this.registry],
  });
  readonly leasesLost = new Counter({
    name: "sessionmux_leases_lost_total",
    help: "Session leases this host lost before releasing them, by reason: renewal_refused (another host has it) or fenced (an append under it was refused)",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly leaseRenewalFailures = new Counter({
    name: "sessionmux_lease_renewal_failures_total",
    help: "Lease renewal rounds the database did not answer (the leases run out if it goes on)",
    registers: [this.registry],
  });
  readonly forwardedCalls = new Counter({
    name: "sessionmux_forwarded_calls_total",
    help: "Calls sent to the host running the session's agent, by outcome: ok, error (its typed error), not_owner, timeout, withdrawn (taken back unbegun once the owner's lease ended; the owner resolved again), not_begun (claimed and not begun at the longest wait while the owner held the session: taken back unrun, the caller told overloaded), unknown (begun, and not answered before the owner's lease ended or the longest wait, or the database connection failed once it was sent to be recorded; the caller told outcome_unknown) or not_recorded (the database could not record it; the caller told persistence_failure)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly refusals = new Counter({
    name: "sessionmux_refused_total",
    help: "HTTP requests and WebSocket upgrades refused before a route or a call ran, by code: unauthorized, forbidden_origin, overloaded (the app's authenticate busy or slow), too_many_connections; a /metrics scrape's wrong token or Origin too",
    labelNames: ["code"] as const,
    registers: [this.registry],
  });
  /** The host's database connection pools, read once per scrape (none on the embedded store). */
  readonly #pools = new ScrapeReading<Record<string, PoolStats>>();
  readonly dbConnections = new Gauge({
    name: "sessionmux_db_connections",
    help: "Database connections of the host's pools (PostgreSQL), by pool (reads, writer, inbox, uploads, readiness) and state (idle, busy)",
    labelNames: ["pool", "state"] as const,
    registers: [this.registry],
    collect: () => {
      this.dbConnections.reset();
      for (const [pool, stats] of Object.entries(this.#pools.value() ?? {})) {
        this.dbConnections.set({ pool, state: "idle" }, stats.idle);
        this.dbConnections.set({ pool, state: "busy" }, stats.total - stats.idle);
      }
    },
  });
  readonly dbWaiting = new Gauge({
    name: "sessionmux_db_waiting",
    help: "Requests waiting for a database connection, by pool: often above 0 for reads, the pool (--db-pool-size) is too small or the database slow",
    labelNames: ["pool"] as const,
    registers: [this.registry],
    collect: () => {
      this.dbWaiting.reset();
      for (const [pool, stats] of Object.entries(this.#pools.value() ?? {}))
        this.dbWaiting.set({ pool }, stats.waiting);
    },
  });
  /** The live state in view, counted once per scrape (see `SessionHost.liveCounts`). */
  readonly #live = new ScrapeReading<LiveCounts>();
  readonly queuedPrompts = new Gauge({
    name: "sessionmux_queued_prompts",
    help: "Prompts queued behind a running turn, in every session in view (hosts sharing a database each see them all)",
    registers: [this.registry],
    collect: () => {
      const counts = this.#live.value();
      if (counts) this.queuedPrompts.set(counts.queued);
    },
  });
  readonly pendingInteractions = new Gauge({
    name: "sessionmux_pending_interactions",
    help: "Approvals and questions waiting for an answer, by kind, in every session in view",
    labelNames: ["kind"] as const,
    registers: [this.registry],
    collect: () => {
      const counts = this.#live.value();
      if (!counts) return;
      for (const [kind, count] of Object.entries(counts.interactions))
        this.pendingInteractions.set({ kind }, count);
    },
  });
  readonly runningJobs = new Gauge({
    name: "sessionmux_running_jobs",
    help: "Background jobs running, in every session in view",
    registers: [this.registry],
    collect: () => {
      const counts = this.#live.value();
      if (counts) this.runningJobs.set(counts.runningJobs);
    },
  });
  readonly httpRequests = new Counter({
    name: "sessionmux_http_requests_total",
    help: "HTTP requests by route and status",
    labelNames: ["route", "status"] as const,
    registers: [this.registry],
  });
  readonly httpSeconds = new Histogram({
    name: "sessionmux_http_request_seconds",
    help: "HTTP request latency, until the response is finished, by route",
    labelNames: ["route"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly callSeconds = new Histogram({
    name: "sessionmux_call_seconds",
    help: "Mux call latency in the host, by method and outcome (ok or the error code); a session.download stream until its attachment opens",
    labelNames: ["method", "outcome"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly turnSeconds = new Histogram({
    name: "sessionmux_turn_seconds",
    help: "Agent run time of a turn, by end state",
    labelNames: ["state"] as const,
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900],
    registers: [this.registry],
  });
  readonly firstTokenSeconds = new Histogram({
    name: "sessionmux_turn_first_token_seconds",
    help: "Time from the start of an agent run to its first committed text",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    // A labelled counter's series appears at its first count, with that count as its first
    // sample: `increase()` and `rate()` read a change from the first sample on, so the first lease
    // lost, forwarded call timed out or socket dropped would never show. Each known label is
    // served at 0 from the first scrape instead.
    for (const reason of LEASE_LOSSES) this.leasesLost.inc({ reason }, 0);
    for (const outcome of FORWARD_METRICS) this.forwardedCalls.inc({ outcome }, 0);
    for (const code of REFUSED_CODES) this.refusals.inc({ code }, 0);
    for (const reason of HEARTBEAT_DROPS) this.heartbeatDrops.inc({ reason }, 0);
    if (!options.defaultMetrics) return;
    const shared = processMetrics();
    for (const { name } of shared.getMetricsAsArray()) {
      const metric = shared.getSingleMetric(name);
      if (metric) this.registry.registerMetric(metric);
    }
  }

  /** Names this host in `/metrics` (one series, value 1). */
  hostInfo(hostId: string): void {
    this.#hostInfo.reset();
    this.#hostInfo.set({ host_id: hostId }, 1);
  }

  committed(seconds: number, appendedEvents: number): void {
    this.commitSeconds.observe(seconds);
    if (appendedEvents > 0) this.appends.inc(appendedEvents);
  }

  listenerFailed(): void {
    this.listenerFailures.inc();
  }

  agentsLive(count: number): void {
    this.agentsLiveGauge.set(count);
  }

  leasesHeld(count: number): void {
    this.leasesHeldGauge.set(count);
  }

  leaseTakenOver(): void {
    this.leaseTakeovers.inc();
  }

  leaseLost(reason: LeaseLoss): void {
    this.leasesLost.inc({ reason });
  }

  leaseRenewalFailed(): void {
    this.leaseRenewalFailures.inc();
  }

  /** Serves the live state's counts, as `read` tells them at each scrape. */
  liveState(read: () => LiveCounts): void {
    this.#live.source = read;
  }

  /** Serves the host's database connection pools, as `read` tells them at each scrape. */
  databasePools(read: () => Record<string, PoolStats>): void {
    this.#pools.source = read;
  }

  /** A request or upgrade refused before it reached a route or a call. */
  refused(code: string): void {
    this.refusals.inc({ code });
  }

  callForwarded(outcome: string): void {
    this.forwardedCalls.inc({ outcome });
  }

  turnEnded(seconds: number, state: string): void {
    this.turnSeconds.observe({ state }, seconds);
  }

  firstToken(seconds: number): void {
    this.firstTokenSeconds.observe(seconds);
  }
}

/**
 * A source that several gauges serve, read once per scrape: the first of them collected in a
 * scrape reads it and the others reuse that reading. A scrape (`registry.metrics()`) calls every
 * metric's collect in one synchronous pass, so the reading is dropped at the next microtask and
 * the next scrape reads the source again.
 */
class ScrapeReading<T> {
  source: (() => T) | undefined;
  #reading: { value: T | undefined } | undefined;

  value(): T | undefined {
    if (!this.#reading) {
      this.#reading = { value: this.source?.() };
      queueMicrotask(() => {
        this.#reading = undefined;
      });
    }
    return this.#reading.value;
  }
}

let processRegistry: Registry | undefined;

/**
 * The Node process metrics (CPU, memory, event loop lag, GC), collected once per process and
 * served by every host in it. Collecting them per host installed a GC observer and an event loop
 * monitor that are never removed, and that held the host's registry: an app opening and closing
 * hosts kept every one of them.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}
