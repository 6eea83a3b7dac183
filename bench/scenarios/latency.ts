import { Fleet } from "../harness/fleet.js";
import { percentile } from "../harness/stats.js";
import type { SubjectFactory } from "../harness/subject.js";
import { deltaEvent, sessionIds } from "../harness/workload.js";

export interface LatencyShape {
  followers: number;
  events: number;
  /** Pause between appends, so the figure is latency, not queueing under saturation. */
  gapMs: number;
}

/**
 * Append→delivery latency (ms) at the followers: one event per append, each awaited. The server
 * and its followers are set up once; each `measure` appends `events` more.
 */
export async function openLatency(
  factory: SubjectFactory,
  shape: LatencyShape,
): Promise<{
  measure(): Promise<{ p50: number; p99: number; samples: number[] }>;
  close(): Promise<void>;
}> {
  const subject = await factory();
  const fleet = Fleet.start();
  const close = async () => {
    await fleet.stop();
    await subject.close();
  };
  try {
    const ids = sessionIds(1);
    await subject.prepare(ids);
    let last = await subject.publish(0, [deltaEvent(0)]);
    await fleet.connectTo(subject, {
      count: shape.followers,
      streams: [{ id: 1, sessionId: ids[0]!, afterSeq: 0 }],
      recordLatency: true,
    });
    await fleet.send({ cmd: "target", targets: [[1, last]], timeoutMs: 60_000 });
    await fleet.send({ cmd: "stats" });
    const measure = async () => {
      for (let i = 1; i <= shape.events; i++) {
        last = await subject.publish(0, [deltaEvent(i)]);
        await new Promise((resolve) => setTimeout(resolve, shape.gapMs));
      }
      await fleet.send({ cmd: "target", targets: [[1, last]], timeoutMs: 60_000 });
      const { stats } = await fleet.send({ cmd: "stats" });
      if (stats!.dup > 0 || stats!.gap > 0)
        throw new Error(`followers saw dup=${stats!.dup} gap=${stats!.gap}`);
      const samples = stats!.latencies.filter((ms) => Number.isFinite(ms));
      return { p50: percentile(samples, 50), p99: percentile(samples, 99), samples };
    };
    return { measure, close };
  } catch (error) {
    await close();
    throw error;
  }
}
