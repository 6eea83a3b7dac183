import { heldBytes } from "../../test/support/held-bytes.js";
import { until } from "../../test/support/until.js";
import { Fleet } from "../harness/fleet.js";
import type { OpenSubject } from "../harness/rounds.js";
import type { SubjectFactory } from "../harness/subject.js";
import { paddedDeltaEvent, sessionIds } from "../harness/workload.js";
import { publishRoundRobin } from "./publish.js";

/** Lets sockets finish opening or closing, and writes reach the kernel, before a reading. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

/** A subject and its follower fleet, set up once for all rounds of a memory scenario. */
async function openWithFleet(
  factory: SubjectFactory,
  measure: (
    subject: Awaited<ReturnType<SubjectFactory>>,
    fleet: Fleet,
  ) => Promise<{ value: number; detail: string }>,
): Promise<OpenSubject> {
  const subject = await factory();
  const fleet = Fleet.start();
  const close = async () => {
    await fleet.stop();
    await subject.close();
  };
  try {
    await subject.prepare(sessionIds(1));
    return {
      async measure() {
        try {
          return await measure(subject, fleet);
        } finally {
          // Every run starts from no connection at all.
          await fleet.send({ cmd: "reset" });
          await until(
            async () => (await subject.openSockets()) === 0,
            10_000,
            "the server sees the sockets go",
          );
        }
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Bytes the server holds per connected socket with no stream open. */
export function openIdleMemory(factory: SubjectFactory, connections: number): Promise<OpenSubject> {
  return openWithFleet(factory, async (subject, fleet) => {
    const before = heldBytes();
    await fleet.connectTo(subject, { count: connections, streams: [], concurrency: 250 });
    await settle();
    const after = heldBytes();
    return { value: (after - before) / connections, detail: `${connections} idle sockets` };
  });
}

/**
 * Bytes the server holds per follower that stopped reading while `events` of about `eventBytes`
 * each flowed: held while stalled minus held after they caught up (the log itself is excluded
 * that way). The stalled followers must then catch up exactly. Each run's followers start at the
 * session's head.
 */
export function openStalledMemory(
  factory: SubjectFactory,
  stalled: number,
  events: number,
  eventBytes: number,
): Promise<OpenSubject> {
  const sessionId = sessionIds(1)[0]!;
  let head = 0;
  return openWithFleet(factory, async (subject, fleet) => {
    [head] = (await publishRoundRobin(subject, 1, 1, 1, 1)) as [number];
    await fleet.connectTo(subject, { count: stalled, streams: [{ id: 1, sessionId, afterSeq: head - 1 }] });
    await fleet.send({ cmd: "target", targets: [[1, head]], timeoutMs: 60_000 });
    await fleet.send({ cmd: "stall", count: stalled });
    const event = (index: number) => paddedDeltaEvent(index, eventBytes);
    [head] = (await publishRoundRobin(subject, 1, events, 50, 4, event)) as [number];
    await settle();
    const whileStalled = heldBytes();
    await fleet.send({ cmd: "unstall" });
    await fleet.send({ cmd: "target", targets: [[1, head]], timeoutMs: 120_000 }, 150_000);
    await settle();
    const caughtUp = heldBytes();
    const { stats } = await fleet.send({ cmd: "stats" });
    if (stats!.dup > 0 || stats!.gap > 0)
      throw new Error(`followers saw dup=${stats!.dup} gap=${stats!.gap}`);
    return {
      value: Math.max(0, whileStalled - caughtUp) / stalled,
      detail: `${stalled} stalled followers, ${events.toLocaleString("en-US")} events of ${eventBytes.toLocaleString("en-US")} bytes, caught up exactly`,
    };
  });
}
