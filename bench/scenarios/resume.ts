import { until } from "../../test/support/until.js";
import { Fleet } from "../harness/fleet.js";
import type { OpenSubject } from "../harness/rounds.js";
import type { SubjectFactory } from "../harness/subject.js";
import { sessionIds } from "../harness/workload.js";
import { publishRoundRobin } from "./publish.js";

export interface ResumeShape {
  followers: number;
  /** Events each follower misses while disconnected. */
  behind: number;
}

/**
 * Many followers of one session drop their sockets, miss `behind` events, then all reconnect at
 * once; the figure is the server's CPU (ms) from the reconnect until every one has caught up
 * exactly. CPU rather than wall time because the 1,000 handshakes of the follower process, on the
 * other core, bound the wall time of every subject alike; the wall time is kept in the detail.
 * The server and the followers are set up once; each `measure` is one drop and resume.
 */
export async function openResume(factory: SubjectFactory, shape: ResumeShape): Promise<OpenSubject> {
  const subject = await factory();
  const fleet = Fleet.start();
  const close = async () => {
    await fleet.stop();
    await subject.close();
  };
  try {
    const ids = sessionIds(1);
    await subject.prepare(ids);
    const [head] = await publishRoundRobin(subject, 1, shape.behind, 50, 1);
    await fleet.connectTo(subject, {
      count: shape.followers,
      streams: [{ id: 1, sessionId: ids[0]!, afterSeq: 0 }],
      concurrency: 100,
    });
    await fleet.send({ cmd: "target", targets: [[1, head!]], timeoutMs: 120_000 });
    const measure = async () => {
      await fleet.send({ cmd: "drop" });
      // The server sees every socket go before the events they will miss are appended.
      await until(
        async () => (await subject.openSockets()) === 0,
        10_000,
        "the server sees the dropped sockets go",
      );
      const [newHead] = await publishRoundRobin(subject, 1, shape.behind, 50, 1);
      const cpuBefore = process.cpuUsage();
      const reconnect = await fleet.send({ cmd: "reconnect", concurrency: shape.followers }, 180_000);
      const done = await fleet.send({ cmd: "target", targets: [[1, newHead!]], timeoutMs: 120_000 }, 150_000);
      const cpu = process.cpuUsage(cpuBefore);
      const { stats } = await fleet.send({ cmd: "stats" });
      if (stats!.dup > 0 || stats!.gap > 0)
        throw new Error(`followers saw dup=${stats!.dup} gap=${stats!.gap}`);
      const cpuMs = (cpu.user + cpu.system) / 1000;
      return {
        value: cpuMs,
        cpuMs,
        count: 1,
        cost: true,
        detail: `${shape.followers} followers × ${shape.behind} missed events, all caught up in ${(done.at - reconnect.at).toFixed(0)} ms wall, exact`,
      };
    };
    return { measure, close };
  } catch (error) {
    await close();
    throw error;
  }
}
