import { Fleet } from "../harness/fleet.js";
import type { OpenSubject } from "../harness/rounds.js";
import { wallNow } from "../harness/stats.js";
import type { SubjectFactory } from "../harness/subject.js";
import { deltaEvent, sessionIds } from "../harness/workload.js";
import { publishRoundRobin } from "./publish.js";

export interface FanoutShape {
  sessions: number;
  /** Follower connections; each follows every session. */
  connections: number;
  eventsPerSession: number;
  batch: number;
}

/**
 * Deliveries per second of server CPU (producing, storing and sending included), every follower
 * checked for exactly 1..N. CPU rather than wall time because on a small machine the followers'
 * decoding, not the server, bounds the wall-clock rate; the wall rate is kept in the detail.
 * The server and its followers are set up once; each `measure` publishes `eventsPerSession` more
 * events to every session, the CPU window spanning exactly the publishing and delivery.
 */
export async function openFanout(factory: SubjectFactory, shape: FanoutShape): Promise<OpenSubject> {
  const subject = await factory();
  const fleet = Fleet.start();
  const close = async () => {
    await fleet.stop();
    await subject.close();
  };
  try {
    const ids = sessionIds(shape.sessions);
    await subject.prepare(ids);
    let heads = await Promise.all(ids.map((_, i) => subject.publish(i, [deltaEvent(0)])));
    await fleet.connectTo(subject, {
      count: shape.connections,
      streams: ids.map((sessionId, i) => ({ id: i + 1, sessionId, afterSeq: 0 })),
    });
    await fleet.send({ cmd: "target", targets: heads.map((seq, i) => [i + 1, seq]), timeoutMs: 60_000 });
    let followersCpu = (await fleet.send({ cmd: "stats" })).stats!.cpuMs!;
    const measure = async () => {
      const expected = heads.map((seq) => seq + shape.eventsPerSession);
      const cpuBefore = process.cpuUsage();
      const started = wallNow();
      const reached = fleet.send(
        { cmd: "target", targets: expected.map((seq, i) => [i + 1, seq]), timeoutMs: 180_000 },
        200_000,
      );
      const last = await publishRoundRobin(subject, shape.sessions, shape.eventsPerSession, shape.batch);
      if (last.some((seq, i) => seq !== expected[i]))
        throw new Error("publisher seqs differ from the expected head");
      const done = await reached;
      const cpu = process.cpuUsage(cpuBefore);
      heads = expected;
      const { stats } = await fleet.send({ cmd: "stats" });
      const followersMs = stats!.cpuMs! - followersCpu;
      followersCpu = stats!.cpuMs!;
      if (stats!.dup > 0 || stats!.gap > 0 || stats!.errors.length > 0)
        throw new Error(`followers saw dup=${stats!.dup} gap=${stats!.gap} ${stats!.errors.join("; ")}`);
      const delivered = shape.sessions * shape.connections * shape.eventsPerSession;
      const elapsed = done.at - started;
      const cpuMs = (cpu.user + cpu.system) / 1000;
      return {
        value: (delivered * 1000) / cpuMs,
        cpuMs,
        count: delivered,
        detail:
          `${delivered.toLocaleString("en-US")} deliveries, server CPU ${cpuMs.toFixed(0)} ms, ` +
          `wall ${elapsed.toFixed(0)} ms (${Math.round((delivered * 1000) / elapsed).toLocaleString("en-US")}/s), ` +
          `follower process CPU ${followersMs.toFixed(0)} ms, exact 1..N`,
      };
    };
    return { measure, close };
  } catch (error) {
    await close();
    throw error;
  }
}
