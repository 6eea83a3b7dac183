import { type ChildProcess, fork } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import type { LimitCommand, LimitReply } from "../baselines/durable-limit-child.js";
import { withDeadline } from "../harness/deadline.js";
import { Fleet } from "../harness/fleet.js";
import type { Measurement } from "../harness/rounds.js";
import { startSessionmux } from "./sessionmux-subject.js";

export interface AgentsShape {
  sessions: number;
  /** Follower connections; each follows every session. */
  followers: number;
  /** Deltas each session's turn streams (`/stream N 0`: as fast as commits allow). */
  deltas: number;
}

const ADMIN = { name: "admin", admin: true } as const;
const LIMIT_CHILD = fileURLToPath(new URL("../baselines/durable-limit-child.ts", import.meta.url));

type Template = { type: string; data: unknown }[];

/**
 * Every session's demo agent streams `deltas` deltas at once through the real turn runner (emit →
 * append → group commit → projection → notify → frame), followed live by `followers` sockets.
 * The figure is deliveries per second of host CPU, every follower checked for exactly 1..N.
 * Returns the events of one session's turn too, so the durable limit commits the same ones.
 */
export async function agentsStreaming(shape: AgentsShape): Promise<Measurement & { template: Template }> {
  const subject = await startSessionmux();
  const fleet = Fleet.start();
  try {
    const host = subject.running.host;
    const ids: string[] = [];
    for (let i = 0; i < shape.sessions; i++) {
      const created = await host.call(ADMIN, "session.create", { title: `agents ${i}` });
      ids.push(created.header.sessionId);
    }
    const heads = async () =>
      Promise.all(
        ids.map(async (id) => {
          const h = await subject.running.store.header(id);
          if (h.status !== "ok") throw new Error(`header ${id}: ${h.status}`);
          return h.headSeq;
        }),
      );
    const turnsEnded = (count: number) => {
      let ended = 0;
      return new Promise<void>((resolve) => {
        const stop = subject.running.store.subscribeAll((_, notice) => {
          if (notice.kind !== "append") return;
          for (const e of notice.events) if (e.type === "turn/end") ended++;
          if (ended >= count) {
            stop();
            resolve();
          }
        });
      });
    };
    // one turn each first: agents attached, code paths warm
    const warmed = turnsEnded(ids.length);
    await Promise.all(
      ids.map((sessionId) =>
        host.call(ADMIN, "session.prompt", { sessionId, text: "/stream 5 0", clientMessageId: randomUUID() }),
      ),
    );
    await withDeadline(warmed, 60_000, "warm-up turns");
    const before = await heads();
    await fleet.connectTo(subject, {
      count: shape.followers,
      streams: ids.map((sessionId, i) => ({ id: i + 1, sessionId, afterSeq: 0 })),
    });
    await fleet.send({ cmd: "target", targets: before.map((seq, i) => [i + 1, seq]), timeoutMs: 60_000 });
    await fleet.send({ cmd: "stats" });

    const cpuBefore = process.cpuUsage();
    const ended = turnsEnded(ids.length);
    await Promise.all(
      ids.map((sessionId) =>
        host.call(ADMIN, "session.prompt", {
          sessionId,
          text: `/stream ${shape.deltas} 0`,
          clientMessageId: randomUUID(),
        }),
      ),
    );
    await withDeadline(ended, 180_000, "streaming turns");
    const after = await heads();
    await fleet.send(
      { cmd: "target", targets: after.map((seq, i) => [i + 1, seq]), timeoutMs: 180_000 },
      200_000,
    );
    const cpu = process.cpuUsage(cpuBefore);
    const { stats } = await fleet.send({ cmd: "stats" });
    if (stats!.dup > 0 || stats!.gap > 0 || stats!.errors.length > 0)
      throw new Error(`followers saw dup=${stats!.dup} gap=${stats!.gap} ${stats!.errors.join("; ")}`);
    const events = after.reduce((n, seq, i) => n + seq - before[i]!, 0);
    const deliveries = events * shape.followers;
    const cpuMs = (cpu.user + cpu.system) / 1000;
    const read = await subject.running.store.readAfter(ids[0]!, before[0]!, after[0]! - before[0]!);
    if (read.status !== "ok") throw new Error(`read: ${read.status}`);
    return {
      value: (deliveries * 1000) / cpuMs,
      cpuMs,
      count: deliveries,
      detail: `${deliveries.toLocaleString("en-US")} deliveries (${events.toLocaleString("en-US")} events), host CPU ${cpuMs.toFixed(0)} ms, exact 1..N`,
      template: read.events.map((e) => ({ type: e.type, data: e.data })),
    };
  } finally {
    await fleet.stop();
    await subject.close();
  }
}

/** The same events committed and sent at the limit, in a process of its own (see durable-limit-child). */
export async function durableLimit(shape: AgentsShape, template: Template): Promise<Measurement> {
  const child = fork(LIMIT_CHILD, [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const fleet = Fleet.start();
  const ask = childAsker(child);
  try {
    const prepared = await ask({ cmd: "prepare", sessions: shape.sessions, template });
    await fleet.connectTo(
      { kind: "raw", url: prepared.url! },
      {
        count: shape.followers,
        streams: Array.from({ length: shape.sessions }, (_, i) => ({
          id: i + 1,
          sessionId: `s${i}`,
          afterSeq: 0,
        })),
      },
    );
    await fleet.send({ cmd: "stats" });
    await ask({ cmd: "run" });
    const targets: [number, number][] = Array.from({ length: shape.sessions }, (_, i) => [
      i + 1,
      template.length,
    ]);
    await fleet.send({ cmd: "target", targets, timeoutMs: 180_000 }, 200_000);
    const { cpuMs } = await ask({ cmd: "cpu" });
    const { stats } = await fleet.send({ cmd: "stats" });
    if (stats!.dup > 0 || stats!.gap > 0 || stats!.errors.length > 0)
      throw new Error(`followers saw dup=${stats!.dup} gap=${stats!.gap} ${stats!.errors.join("; ")}`);
    const deliveries = shape.sessions * template.length * shape.followers;
    return {
      value: (deliveries * 1000) / cpuMs!,
      cpuMs: cpuMs!,
      count: deliveries,
      detail: `${deliveries.toLocaleString("en-US")} deliveries, limit process CPU ${cpuMs!.toFixed(0)} ms, exact 1..N`,
    };
  } finally {
    await fleet.stop();
    await ask({ cmd: "close" }).catch(() => child.kill("SIGKILL"));
  }
}

function childAsker(child: ChildProcess): (command: LimitCommand) => Promise<LimitReply & { ok: true }> {
  let seq = 0;
  const waiting = new Map<number, (reply: LimitReply) => void>();
  child.on("message", (m: { seq: number; reply: LimitReply }) => {
    waiting.get(m.seq)?.(m.reply);
    waiting.delete(m.seq);
  });
  return async (command) => {
    const id = ++seq;
    const reply = new Promise<LimitReply>((resolve) => waiting.set(id, resolve));
    child.send({ seq: id, command });
    const answer = await withDeadline(reply, 120_000, `durable limit ${command.cmd}`);
    if (!answer.ok) throw new Error(`durable limit ${command.cmd}: ${answer.error}`);
    return answer;
  };
}
