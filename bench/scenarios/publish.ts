import type { FanoutSubject } from "../harness/subject.js";
import { type DeltaEvent, deltaEvent } from "../harness/workload.js";

/**
 * Publishes `perSession` events (`event(i)`, by default a `deltaEvent`) to each of `sessions`
 * sessions in batches, round-robin, with at most `window` publishes in flight; returns each
 * session's last seq. Yields to I/O between batches so sockets drain while the producer runs, as
 * they would under a real agent.
 */
export async function publishRoundRobin(
  subject: FanoutSubject,
  sessions: number,
  perSession: number,
  batch: number,
  window = 8,
  event: (index: number) => DeltaEvent = deltaEvent,
): Promise<number[]> {
  const last = new Array<number>(sessions).fill(0);
  const jobs: { index: number; size: number }[] = [];
  for (let offset = 0; offset < perSession; offset += batch)
    for (let index = 0; index < sessions; index++)
      jobs.push({ index, size: Math.min(batch, perSession - offset) });
  let next = 0;
  let counter = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const job = jobs[next++]!;
      const events = Array.from({ length: job.size }, () => event(counter++));
      const seq = await subject.publish(job.index, events);
      last[job.index] = Math.max(last[job.index]!, seq);
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  // Appends to one session are committed in call order, so overlapping batches stay contiguous.
  await Promise.all(Array.from({ length: window }, worker));
  return last;
}
