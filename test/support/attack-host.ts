import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { type CliHost, spawnCliHost } from "../torture/cli-host.js";
import { ADMIN_TOKEN } from "./host.js";
import { MuxPeer } from "./mux-peer.js";
import { tempDir } from "./temp-dir.js";
import { until } from "./until.js";

const MIB = 1024 * 1024;
const CPU_PROBE = fileURLToPath(new URL("./loop-cpu-probe.mjs", import.meta.url));

export interface Measured<T> {
  result: T;
  rssGrowth: number;
  healthzWorstMs: number;
  stall: LoopStall;
}

/**
 * Event-loop delay inside the host over a window: wall-clock, from its own
 * `monitorEventLoopDelay` (prom-client), which also counts time the machine's other processes
 * kept the host off the cores; and in CPU time (`loop-cpu-probe.mjs`), which shows what the host
 * itself blocks on.
 */
export interface LoopStall {
  maxMs: number;
  p99Ms: number;
  cpuMaxMs: number;
  cpuP99Ms: number;
}

/**
 * `sessionmux serve` as a child process under attack: its resident memory is read from
 * `/proc`, its event-loop delay from its own metrics, and a canary follower on another socket
 * must keep receiving every event exactly once while `/healthz` keeps answering.
 */
export class AttackHost {
  #stderr = "";

  private constructor(
    readonly cli: CliHost,
    readonly dbPath: string,
    private readonly removeDir: () => void,
  ) {
    cli.child.stderr!.on("data", (chunk: Buffer) => {
      this.#stderr += chunk.toString();
    });
  }

  static async start(extra: string[] = []): Promise<AttackHost> {
    const dir = tempDir();
    const dbPath = dir.file("sessions.db");
    const cli = await spawnCliHost({ dbPath, token: ADMIN_TOKEN, extra, nodeArgs: ["--import", CPU_PROBE] });
    return new AttackHost(cli, dbPath, dir.remove);
  }

  get url(): string {
    return `http://127.0.0.1:${this.cli.port}`;
  }

  get wsUrl(): string {
    return this.cli.wsUrl;
  }

  /** Uploads `bytes` bytes as the admin; answers the attachment id. */
  async upload(bytes: number): Promise<string> {
    const res = await fetch(`${this.url}/v1/attachments`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/octet-stream" },
      body: new Uint8Array(bytes).fill(1),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { attachmentId: string }).attachmentId;
  }

  /** The host's resident set size now. */
  rssBytes(): number {
    return this.#status("VmRSS");
  }

  /** The largest resident set size the host has had (the kernel's high-water mark). */
  peakRssBytes(): number {
    return this.#status("VmHWM");
  }

  #status(field: string): number {
    const status = readFileSync(`/proc/${this.cli.child.pid}/status`, "utf8");
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
    if (!match) throw new Error(`no ${field} in /proc status`);
    return Number(match[1]) * 1024;
  }

  /** Starts a measurement window: the host's delay histogram is reset at each scrape. */
  async startLoopWindow(): Promise<void> {
    await this.#metricsText();
    await this.#cpuWindow();
  }

  /** The CPU probe's figures since its last window (it starts a new one). */
  async #cpuWindow(): Promise<{ maxMs: number; p99Ms: number }> {
    const seen = this.#stderr.length;
    this.cli.child.kill("SIGUSR2");
    const line = await until(
      () => /loop-cpu (\{.*\})\n/.exec(this.#stderr.slice(seen)) ?? undefined,
      10_000,
      "the host's CPU probe answers",
    );
    return JSON.parse(line[1]!) as { maxMs: number; p99Ms: number };
  }

  /** Event-loop delay since `startLoopWindow`. */
  async loopStall(): Promise<LoopStall> {
    const text = await this.#metricsText();
    const seconds = (name: string) =>
      Number(new RegExp(`^${name} ([0-9.e+-]+)$`, "m").exec(text)?.[1] ?? NaN);
    const cpu = await this.#cpuWindow();
    return {
      maxMs: seconds("nodejs_eventloop_lag_max_seconds") * 1000,
      p99Ms: seconds("nodejs_eventloop_lag_p99_seconds") * 1000,
      cpuMaxMs: cpu.maxMs,
      cpuP99Ms: cpu.p99Ms,
    };
  }

  async #metricsText(): Promise<string> {
    const res = await fetch(`${this.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
    return res.text();
  }

  /** Milliseconds one `/healthz` took, failing past `limitMs`. */
  async healthzMs(limitMs = 5_000): Promise<number> {
    const started = performance.now();
    const res = await fetch(`${this.url}/healthz`, { signal: AbortSignal.timeout(limitMs) });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    return performance.now() - started;
  }

  /**
   * Runs `work` (the canary's check while an attack goes on) and measures the host meanwhile:
   * resident memory growth over its value at the start, the slowest `/healthz`, event-loop delay.
   */
  async measure<T>(work: () => Promise<T>): Promise<Measured<T>> {
    await this.startLoopWindow();
    const rssBefore = this.rssBytes();
    let rssPeak = rssBefore;
    const sampler = setInterval(() => {
      if (this.cli.child.exitCode === null) rssPeak = Math.max(rssPeak, this.rssBytes());
    }, 20);
    let healthzWorstMs = 0;
    try {
      let settled = false;
      const running = work().finally(() => {
        settled = true;
      });
      const deadline = Date.now() + 60_000;
      while (!settled && Date.now() < deadline)
        healthzWorstMs = Math.max(healthzWorstMs, await this.healthzMs());
      const result = await running;
      rssPeak = Math.max(rssPeak, this.rssBytes());
      return { result, rssGrowth: rssPeak - rssBefore, healthzWorstMs, stall: await this.loopStall() };
    } finally {
      clearInterval(sampler);
    }
  }

  async dispose(): Promise<void> {
    await this.cli.kill9();
    this.removeDir();
  }
}

/**
 * A follower on its own socket while a turn streams, checked to receive every event exactly once
 * and in order.
 */
export class Canary {
  private constructor(
    readonly peer: MuxPeer,
    readonly sessionId: string,
    readonly streamId: number,
  ) {}

  static async start(host: AttackHost): Promise<Canary> {
    const peer = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    const { header } = await peer.call<{ header: { sessionId: string } }>("session.create", {});
    const id = peer.follow(header.sessionId);
    await peer.waitItem(id, (item) => item.kind === "caughtUp");
    return new Canary(peer, header.sessionId, id);
  }

  /** Starts a turn of `chunks` deltas `ms` apart, to flow during the attack. */
  async stream(chunks: number, ms: number): Promise<void> {
    await this.peer.call("session.prompt", {
      sessionId: this.sessionId,
      text: `/stream ${chunks} ${ms}`,
      clientMessageId: `canary-${Date.now()}`,
    });
  }

  /** Waits for the turn to end, then checks the follower saw the whole log exactly once. */
  async check(timeoutMs = 60_000): Promise<number> {
    await until(
      () => this.peer.events(this.streamId).some((event: SessionEvent) => event.type === "turn/end"),
      timeoutMs,
      "the canary's turn ends",
    );
    const page = await this.peer.call<{ headSeq: number }>("session.page", { sessionId: this.sessionId });
    await this.peer.waitSeq(this.streamId, page.headSeq, timeoutMs);
    expect(this.peer.violations).toEqual([]);
    const seqs = this.peer.events(this.streamId).map((event) => event.seq);
    expect(seqs).toEqual(Array.from({ length: page.headSeq }, (_, i) => i + 1));
    expect(this.peer.terminal(this.streamId)).toBeUndefined();
    return seqs.length;
  }

  async dispose(): Promise<void> {
    await this.peer.disconnect();
  }
}

export const mib = (bytes: number): string => (bytes / MIB).toFixed(1);

/** One line of figures for the report of a scenario. */
export function report(scenario: string, measured: Measured<unknown>, extra = ""): void {
  const { rssGrowth, healthzWorstMs, stall } = measured;
  process.stdout.write(
    `${scenario}: host RSS growth ${mib(rssGrowth)} MiB, healthz worst ${healthzWorstMs.toFixed(1)} ms, ` +
      `event loop max ${stall.maxMs.toFixed(1)} ms p99 ${stall.p99Ms.toFixed(1)} ms, ` +
      `in CPU time max ${stall.cpuMaxMs.toFixed(1)} ms p99 ${stall.cpuP99Ms.toFixed(1)} ms${extra}\n`,
  );
}
