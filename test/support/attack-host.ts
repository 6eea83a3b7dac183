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
const STALL_PROBE = fileURLToPath(new URL("./loop-stall-probe.mjs", import.meta.url));

export interface Measured<T> {
  result: T;
  /** Peak resident memory over the start: what the host holds, and garbage not yet collected. */
  rssGrowth: number;
  /** Heap in use and Buffers after a full collection, end over start: what the host holds. */
  heldGrowth: number;
  healthzWorstMs: number;
  stall: LoopStall;
}

/**
 * Event-loop delay inside the host over a window, sampled every millisecond by
 * `loop-stall-probe.mjs`: wall-clock beyond the 1 ms sampling interval (`monitorEventLoopDelay`,
 * which also counts time the machine's other processes kept the host off the cores), and the main
 * thread's CPU time between two ticks of a 1 ms timer, which shows what the host itself blocks on.
 * p99 is over the window's 1 ms samples. `heldBytes`: heap in use and Buffers after a full
 * collection at the window's end.
 */
export interface LoopStall {
  wallMaxMs: number;
  wallP99Ms: number;
  cpuMaxMs: number;
  cpuP99Ms: number;
  samples: number;
  heldBytes: number;
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
    const nodeArgs = ["--expose-gc", "--import", STALL_PROBE];
    const cli = await spawnCliHost({ dbPath, token: ADMIN_TOKEN, extra, nodeArgs });
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
    const res = await this.postUpload(new Uint8Array(bytes).fill(1));
    expect(res.status).toBe(200);
    return ((await res.json()) as { attachmentId: string }).attachmentId;
  }

  /** A POST to the upload route as the admin, whatever it answers; a stream body goes out as its source yields it. */
  postUpload(body: BodyInit, headers: Record<string, string> = {}): Promise<Response> {
    return fetch(`${this.url}/v1/attachments`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        "content-type": "application/octet-stream",
        ...headers,
      },
      body,
      duplex: "half",
    } as RequestInit);
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

  /** Starts a measurement window; answers the bytes held at its start. */
  async startLoopWindow(): Promise<number> {
    return (await this.loopStall()).heldBytes;
  }

  /** The probe's figures since its last window (it collects garbage, then starts a new one). */
  async loopStall(): Promise<LoopStall> {
    const seen = this.#stderr.length;
    this.cli.child.kill("SIGUSR2");
    const line = await until(
      () => /loop-stall (\{.*\})\n/.exec(this.#stderr.slice(seen)) ?? undefined,
      10_000,
      "the host's stall probe answers",
    );
    return JSON.parse(line[1]!) as LoopStall;
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
    const heldBefore = await this.startLoopWindow();
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
      const stall = await this.loopStall();
      return {
        result,
        rssGrowth: rssPeak - rssBefore,
        heldGrowth: stall.heldBytes - heldBefore,
        healthzWorstMs,
        stall,
      };
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
  /** Turns started with `stream`: `check` waits for as many `turn/end` events. */
  #turns = 0;

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
      clientMessageId: `canary-${this.#turns + 1}`,
    });
    this.#turns++;
  }

  /** Waits for the last turn started to end, then checks the follower saw the whole log exactly once. */
  async check(timeoutMs = 60_000): Promise<number> {
    // Counted, not found: an earlier turn's end must not stand for the one still streaming.
    await until(
      () =>
        this.peer.events(this.streamId).filter((event: SessionEvent) => event.type === "turn/end").length >=
        this.#turns,
      timeoutMs,
      "the canary's turn ends",
    );
    // The agent may still append after its turn ends (the session settles): the log is compared
    // once the follower's last event is the head the host reports after it.
    const seqs = await until(
      async () => {
        const page = await this.peer.call<{ headSeq: number }>("session.page", { sessionId: this.sessionId });
        const received = this.peer.events(this.streamId).map((event) => event.seq);
        return received.at(-1) === page.headSeq ? received : undefined;
      },
      timeoutMs,
      "the canary has the whole log",
    );
    expect(this.peer.violations).toEqual([]);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
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
  const { rssGrowth, heldGrowth, healthzWorstMs, stall } = measured;
  process.stdout.write(
    `${scenario}: host RSS growth ${mib(rssGrowth)} MiB, held after GC ${mib(heldGrowth)} MiB, healthz worst ${healthzWorstMs.toFixed(1)} ms, ` +
      `loop delay beyond the 1 ms interval max ${stall.wallMaxMs.toFixed(1)} ms p99 ${stall.wallP99Ms.toFixed(1)} ms, ` +
      `main-thread CPU between 1 ms ticks max ${stall.cpuMaxMs.toFixed(1)} ms p99 ${stall.cpuP99Ms.toFixed(1)} ms ` +
      `(${stall.samples} samples)${extra}\n`,
  );
}
