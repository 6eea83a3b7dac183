import { describe, expect, it } from "vitest";
import type { LiveCounts } from "../../src/host/live/live-registry.js";
import type { PoolStats } from "../../src/store/store-metrics.js";
import { HostMetrics } from "../../src/transport/metrics.js";

/** The sample lines of a scrape (no `# HELP`/`# TYPE`) whose metric name matches `name`. */
async function samples(metrics: HostMetrics, name: RegExp): Promise<string[]> {
  return (await metrics.registry.metrics())
    .split("\n")
    .filter((line) => !line.startsWith("#") && name.test(line.split(/[{ ]/)[0]!));
}

/** A source that counts how often a scrape reads it. */
function counted<T>(read: () => T): { read: () => T; reads: () => number } {
  let reads = 0;
  return {
    read: () => {
      reads += 1;
      return read();
    },
    reads: () => reads,
  };
}

const live = (queued: number, approval: number, question: number, runningJobs: number): LiveCounts => ({
  queued,
  interactions: { approval, question },
  runningJobs,
});

const pool = (total: number, idle: number, waiting: number): PoolStats => ({ total, idle, waiting });

describe("a host's /metrics", () => {
  it("serves every metric under the name and type an operator's queries and alerts are written against", async () => {
    const text = await new HostMetrics().registry.metrics();
    const types = text.split("\n").filter((line) => line.startsWith("# TYPE sessionmux_"));
    expect(types).toEqual([
      "# TYPE sessionmux_host_info gauge",
      "# TYPE sessionmux_connections gauge",
      "# TYPE sessionmux_open_streams gauge",
      "# TYPE sessionmux_frames_in_total counter",
      "# TYPE sessionmux_frames_out_total counter",
      "# TYPE sessionmux_bytes_in_total counter",
      "# TYPE sessionmux_bytes_out_total counter",
      "# TYPE sessionmux_appends_total counter",
      "# TYPE sessionmux_commit_seconds histogram",
      "# TYPE sessionmux_follower_lag_events histogram",
      "# TYPE sessionmux_follow_continuations_total counter",
      "# TYPE sessionmux_slow_followers gauge",
      "# TYPE sessionmux_heartbeat_drops_total counter",
      "# TYPE sessionmux_notifications_dropped_total counter",
      "# TYPE sessionmux_commit_listener_failures_total counter",
      "# TYPE sessionmux_agents_live gauge",
      "# TYPE sessionmux_leases_held gauge",
      "# TYPE sessionmux_lease_takeovers_total counter",
      "# TYPE sessionmux_leases_lost_total counter",
      "# TYPE sessionmux_lease_renewal_failures_total counter",
      "# TYPE sessionmux_forwarded_calls_total counter",
      "# TYPE sessionmux_refused_total counter",
      "# TYPE sessionmux_db_connections gauge",
      "# TYPE sessionmux_db_waiting gauge",
      "# TYPE sessionmux_queued_prompts gauge",
      "# TYPE sessionmux_pending_interactions gauge",
      "# TYPE sessionmux_running_jobs gauge",
      "# TYPE sessionmux_http_requests_total counter",
      "# TYPE sessionmux_http_request_seconds histogram",
      "# TYPE sessionmux_call_seconds histogram",
      "# TYPE sessionmux_turn_seconds histogram",
      "# TYPE sessionmux_turn_first_token_seconds histogram",
    ]);
    // without the process metrics asked for, only the host's own series
    expect(text).not.toMatch(/^(process|nodejs)_/m);
  });

  it("buckets each latency and lag histogram at the bounds its dashboards and SLO alerts use", async () => {
    const metrics = new HostMetrics();
    metrics.committed(0.003, 1);
    metrics.followerLag.observe(5);
    metrics.httpSeconds.observe({ route: "/healthz" }, 0.002);
    metrics.callSeconds.observe({ method: "session.create", outcome: "ok" }, 0.002);
    metrics.turnEnded(3, "completed");
    metrics.firstToken(0.7);
    const bounds = async (name: string) =>
      (await samples(metrics, new RegExp(`^${name}_bucket$`))).map((line) => /le="([^"]+)"/.exec(line)![1]);
    const inf = "+Inf";
    expect(await bounds("sessionmux_commit_seconds")).toEqual([
      "0.0005",
      "0.001",
      "0.002",
      "0.005",
      "0.01",
      "0.025",
      "0.05",
      "0.1",
      "0.25",
      "1",
      inf,
    ]);
    expect(await bounds("sessionmux_follower_lag_events")).toEqual([
      "0",
      "1",
      "10",
      "100",
      "1000",
      "10000",
      "100000",
      inf,
    ]);
    expect(await bounds("sessionmux_http_request_seconds")).toEqual([
      "0.001",
      "0.0025",
      "0.005",
      "0.01",
      "0.025",
      "0.05",
      "0.1",
      "0.25",
      "0.5",
      "1",
      "2.5",
      inf,
    ]);
    expect(await bounds("sessionmux_call_seconds")).toEqual([
      "0.0005",
      "0.001",
      "0.0025",
      "0.005",
      "0.01",
      "0.025",
      "0.05",
      "0.1",
      "0.25",
      "1",
      inf,
    ]);
    expect(await bounds("sessionmux_turn_seconds")).toEqual([
      "0.1",
      "0.25",
      "0.5",
      "1",
      "2.5",
      "5",
      "10",
      "30",
      "60",
      "120",
      "300",
      "900",
      inf,
    ]);
    expect(await bounds("sessionmux_turn_first_token_seconds")).toEqual([
      "0.05",
      "0.1",
      "0.25",
      "0.5",
      "1",
      "2",
      "4",
      "8",
      "15",
      "30",
      "60",
      inf,
    ]);
  });

  it("serves each known label of its labelled counters at 0 before the first count, so rate() and increase() see that count", async () => {
    const metrics = new HostMetrics();
    const counters =
      /^sessionmux_(leases_lost_total|forwarded_calls_total|refused_total|heartbeat_drops_total)$/;
    expect(await samples(metrics, counters)).toEqual([
      'sessionmux_heartbeat_drops_total{reason="silent"} 0',
      'sessionmux_heartbeat_drops_total{reason="stalled"} 0',
      'sessionmux_leases_lost_total{reason="renewal_refused"} 0',
      'sessionmux_leases_lost_total{reason="fenced"} 0',
      'sessionmux_forwarded_calls_total{outcome="ok"} 0',
      'sessionmux_forwarded_calls_total{outcome="error"} 0',
      'sessionmux_forwarded_calls_total{outcome="not_owner"} 0',
      'sessionmux_forwarded_calls_total{outcome="timeout"} 0',
      'sessionmux_forwarded_calls_total{outcome="withdrawn"} 0',
      'sessionmux_forwarded_calls_total{outcome="not_begun"} 0',
      'sessionmux_forwarded_calls_total{outcome="unknown"} 0',
      'sessionmux_forwarded_calls_total{outcome="not_recorded"} 0',
      'sessionmux_refused_total{code="unauthorized"} 0',
      'sessionmux_refused_total{code="forbidden_origin"} 0',
      'sessionmux_refused_total{code="overloaded"} 0',
      'sessionmux_refused_total{code="too_many_connections"} 0',
    ]);
    metrics.leaseLost("fenced");
    metrics.heartbeatDrops.inc({ reason: "stalled" });
    const after = await samples(metrics, counters);
    expect(after).toContain('sessionmux_leases_lost_total{reason="fenced"} 1');
    expect(after).toContain('sessionmux_heartbeat_drops_total{reason="stalled"} 1');
  });

  it("counts what the host, its leases and its agents report, under the labels they report it by", async () => {
    const metrics = new HostMetrics();
    metrics.hostInfo("host-a");
    metrics.hostInfo("host-b");
    metrics.committed(0.003, 5);
    metrics.committed(0.0001, 0);
    metrics.listenerFailed();
    metrics.agentsLive(3);
    metrics.leasesHeld(2);
    metrics.leaseTakenOver();
    metrics.leaseLost("fenced");
    metrics.leaseLost("renewal_refused");
    metrics.leaseLost("fenced");
    metrics.leaseRenewalFailed();
    metrics.refused("unauthorized");
    metrics.refused("too_many_connections");
    metrics.callForwarded("not_owner");
    metrics.turnEnded(2, "completed");
    metrics.turnEnded(40, "interrupted");
    metrics.firstToken(0.3);
    expect(
      await samples(
        metrics,
        /^sessionmux_(host_info|appends_total|commit_seconds_(count|sum)|commit_listener_failures_total|agents_live|leases?_.*|lease_.*|refused_total|forwarded_calls_total|turn_seconds_(count|sum)|turn_first_token_seconds_(count|sum))$/,
      ),
    ).toEqual([
      // renamed: the one series names the host now, not both
      'sessionmux_host_info{host_id="host-b"} 1',
      "sessionmux_appends_total 5",
      "sessionmux_commit_seconds_sum 0.0031",
      "sessionmux_commit_seconds_count 2",
      "sessionmux_commit_listener_failures_total 1",
      "sessionmux_agents_live 3",
      "sessionmux_leases_held 2",
      "sessionmux_lease_takeovers_total 1",
      'sessionmux_leases_lost_total{reason="renewal_refused"} 1',
      'sessionmux_leases_lost_total{reason="fenced"} 2',
      "sessionmux_lease_renewal_failures_total 1",
      'sessionmux_forwarded_calls_total{outcome="ok"} 0',
      'sessionmux_forwarded_calls_total{outcome="error"} 0',
      'sessionmux_forwarded_calls_total{outcome="not_owner"} 1',
      'sessionmux_forwarded_calls_total{outcome="timeout"} 0',
      'sessionmux_forwarded_calls_total{outcome="withdrawn"} 0',
      'sessionmux_forwarded_calls_total{outcome="not_begun"} 0',
      'sessionmux_forwarded_calls_total{outcome="unknown"} 0',
      'sessionmux_forwarded_calls_total{outcome="not_recorded"} 0',
      'sessionmux_refused_total{code="unauthorized"} 1',
      'sessionmux_refused_total{code="forbidden_origin"} 0',
      'sessionmux_refused_total{code="overloaded"} 0',
      'sessionmux_refused_total{code="too_many_connections"} 1',
      'sessionmux_turn_seconds_sum{state="completed"} 2',
      'sessionmux_turn_seconds_count{state="completed"} 1',
      'sessionmux_turn_seconds_sum{state="interrupted"} 40',
      'sessionmux_turn_seconds_count{state="interrupted"} 1',
      "sessionmux_turn_first_token_seconds_sum 0.3",
      "sessionmux_turn_first_token_seconds_count 1",
    ]);
  });

  it("serves the live state as its source counts it at each scrape, and zeros before a host serves one", async () => {
    const metrics = new HostMetrics();
    const liveSeries = () =>
      samples(metrics, /^sessionmux_(queued_prompts|pending_interactions|running_jobs)$/);
    expect(await liveSeries()).toEqual(["sessionmux_queued_prompts 0", "sessionmux_running_jobs 0"]);
    let counts = live(3, 2, 1, 4);
    metrics.liveState(() => counts);
    expect(await liveSeries()).toEqual([
      "sessionmux_queued_prompts 3",
      'sessionmux_pending_interactions{kind="approval"} 2',
      'sessionmux_pending_interactions{kind="question"} 1',
      "sessionmux_running_jobs 4",
    ]);
    counts = live(0, 0, 5, 1);
    expect(await liveSeries()).toEqual([
      "sessionmux_queued_prompts 0",
      'sessionmux_pending_interactions{kind="approval"} 0',
      'sessionmux_pending_interactions{kind="question"} 5',
      "sessionmux_running_jobs 1",
    ]);
  });

  it("serves each database pool's idle and busy connections and its waiting requests, only the pools there are now", async () => {
    const metrics = new HostMetrics();
    const poolSeries = () => samples(metrics, /^sessionmux_db_/);
    expect(await poolSeries()).toEqual([]);
    let pools: Record<string, PoolStats> = { reads: pool(4, 1, 2), writer: pool(1, 1, 0) };
    metrics.databasePools(() => pools);
    expect(await poolSeries()).toEqual([
      'sessionmux_db_connections{pool="reads",state="idle"} 1',
      'sessionmux_db_connections{pool="reads",state="busy"} 3',
      'sessionmux_db_connections{pool="writer",state="idle"} 1',
      'sessionmux_db_connections{pool="writer",state="busy"} 0',
      'sessionmux_db_waiting{pool="reads"} 2',
      'sessionmux_db_waiting{pool="writer"} 0',
    ]);
    // a pool gone since the last scrape leaves no series behind
    pools = { inbox: pool(2, 0, 1) };
    expect(await poolSeries()).toEqual([
      'sessionmux_db_connections{pool="inbox",state="idle"} 0',
      'sessionmux_db_connections{pool="inbox",state="busy"} 2',
      'sessionmux_db_waiting{pool="inbox"} 1',
    ]);
  });

  it("reads the live state once and the database pools once per scrape, and again at the next scrape", async () => {
    const metrics = new HostMetrics();
    let counts = live(1, 1, 0, 0);
    let pools: Record<string, PoolStats> = { reads: pool(2, 2, 0) };
    const liveSource = counted(() => counts);
    const poolSource = counted(() => pools);
    metrics.liveState(liveSource.read);
    metrics.databasePools(poolSource.read);
    const text = await metrics.registry.metrics();
    expect([liveSource.reads(), poolSource.reads()]).toEqual([1, 1]);
    expect(text).toContain("sessionmux_queued_prompts 1\n");
    expect(text).toContain('sessionmux_db_waiting{pool="reads"} 0\n');
    // the next scrape reads the sources again and serves what they tell now
    counts = live(7, 0, 0, 2);
    pools = { reads: pool(2, 0, 3) };
    const next = await metrics.registry.metrics();
    expect([liveSource.reads(), poolSource.reads()]).toEqual([2, 2]);
    expect(next).toContain("sessionmux_queued_prompts 7\n");
    expect(next).toContain("sessionmux_running_jobs 2\n");
    expect(next).toContain('sessionmux_db_connections{pool="reads",state="busy"} 2\n');
    expect(next).toContain('sessionmux_db_waiting{pool="reads"} 3\n');
    // a scrape as JSON too
    await metrics.registry.getMetricsAsJSON();
    expect([liveSource.reads(), poolSource.reads()]).toEqual([3, 3]);
  });

  it("serves the Node process metrics when asked to, next to the host's own", async () => {
    const text = await new HostMetrics({ defaultMetrics: true }).registry.metrics();
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
    expect(text).toMatch(/^sessionmux_connections 0$/m);
  });

  it("collects the process metrics once per process: hosts opened later serve the same ones", () => {
    // one GC observer and one event loop monitor, never removed, for however many hosts an app opens
    const [first, second] = [
      new HostMetrics({ defaultMetrics: true }),
      new HostMetrics({ defaultMetrics: true }),
    ];
    const names = first.registry.getMetricsAsArray().map((metric) => metric.name);
    expect(names).toContain("nodejs_gc_duration_seconds");
    for (const name of names.filter((name) => !name.startsWith("sessionmux_")))
      expect(second.registry.getSingleMetric(name)).toBe(first.registry.getSingleMetric(name));
  });
});
