import { heldBytes } from "../../test/support/held-bytes.js";
import { Fleet } from "../harness/fleet.js";
import type { SubjectFactory } from "../harness/subject.js";
import { sessionIds } from "../harness/workload.js";
import { publishRoundRobin } from "./publish.js";

const settle = () => new Promise((resolve) => setTimeout(resolve, 500));

/** Bytes the server holds per connected socket with no stream open. */
export async function measureIdleMemory(
  factory: SubjectFactory,
  connections: number,
): Promise<{ value: number; detail: string }> {
  const subject = await factory();
  const fleet = await Fleet.start();
  try {
    await subject.prepare(sessionIds(1));
    await settle();
    const before = heldBytes();
    await fleet.connectTo(subject, {
      count: connections,
      streams: [],
      concurrency: 100,
    });
    await settle();
    const after = heldBytes();
    return { value: (after - before) / connections, detail: `${connections} idle sockets` };
  } finally {
    await fleet.stop();
    await subject.close();
  }
}

/**
 * Bytes the server holds per follower that stopped reading while `events` flowed: held while
 * stalled minus held after they caught up (the log itself is excluded that way). The stalled
 * followers must then catch up exactly.
 */
export async function measureStalledMemory(
  factory: SubjectFactory,
  stalled: number,
  events: number,
): Promise<{ value: number; detail: string }> {
  const subject = await factory();
  const fleet = await Fleet.start();
  try {
    const ids = sessionIds(1);
    await subject.prepare(ids);
    const [warm] = await publishRoundRobin(subject, 1, 1, 1, 1);
    await fleet.connectTo(subject, {
      count: stalled,
      streams: [{ id: 1, sessionId: ids[0]!, afterSeq: 0 }],
    });
    await fleet.send({ cmd: "target", targets: [[1, warm!]], timeoutMs: 60_000 });
    await fleet.send({ cmd: "stall", count: stalled });
    const [head] = await publishRoundRobin(subject, 1, events, 100, 4);
    await settle();
    const whileStalled = heldBytes();
    await fleet.send({ cmd: "unstall" });
    await fleet.send({ cmd: "target", targets: [[1, head!]], timeoutMs: 120_000 }, 150_000);
    await settle();
    const caughtUp = heldBytes();
    const { stats } = await fleet.send({ cmd: "stats" });
    if (stats!.dup > 0 || stats!.gap > 0)
      throw new Error(`followers saw dup=${stats!.dup} gap=${stats!.gap}`);
    return {
      value: Math.max(0, whileStalled - caughtUp) / stalled,
      detail: `${stalled} stalled followers, ${events.toLocaleString("en-US")} events, caught up exactly`,
    };
  } finally {
    await fleet.stop();
    await subject.close();
  }
}
