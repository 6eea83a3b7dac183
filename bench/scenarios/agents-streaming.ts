import { type ChildProcess, fork } from "node:child_process";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import type { LimitCommand, LimitReply } from "../baselines/durable-limit-child.js";
import { compiledChild } from "../harness/compiled-child.js";
import { withDeadline } from "../harness/deadline.js";
import { Fleet } from "../harness/fleet.js";
import type { Measurement, OpenSubject } from "../harness/rounds.js";
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
 * The host, its sessions and followers are set up once; each `measure` is one turn per session.
 * Each measurement carries the events of one session's turn, so the durable limit commits the same.
 */
export async function openAgentsStreaming(
  shape: AgentsShape,
): Promise<{ measure(): Promise<Measurement & { template: Template }>; close(): Promise<void> }> {
  const subject = await startSessionmux();
  const fleet = Fleet.start();
  const close = async () => {
    await fleet.stop();
    await subject.close();
  };
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
    const turn = async (deltas: number) => {
      const ended = turnsEnded(ids.length);
      await Promise.all(
        ids.map((sessionId) =>
          host.call(ADMIN, "session.prompt", {
            sessionId,
            text: `/stream ${deltas} 0`,
            clientMessageId: randomUUID(),
          }),
        ),
      );
      await withDeadline(ended, 180_000, "streaming turns");
    };
    // one turn each first: agents attached, code paths warm
    await turn(5);
    let before = await heads();
    await fleet.connectTo(subject, {
      count: shape.followers,
      streams: ids.map((sessionId, i) => ({ id: i + 1, sessionId, afterSeq: 0 })),
    });
    await fleet.send({ cmd: "target", targets: before.map((seq, i) => [i + 1, seq]), timeoutMs: 60_000 });
    await fleet.send({ cmd: "stats" });

    const measure = async () => {
      const cpuBefore = process.cpuUsage();
      await turn(shape.deltas);
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
      before = after;
      return {
        value: (deliveries * 1000) / cpuMs,
        cpuMs,
        count: deliveries,
        detail: `${deliveries.toLocaleString("en-US")} deliveries (${events.toLocaleString("en-US")} events), host CPU ${cpuMs.toFixed(0)} ms, exact 1..N`,
        template: read.events.map((e) => ({ type: e.type, data: e.data })),
      };
    };
    return { measure, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * The same events committed and sent at the limit, in a process of its own (see
 * durable-limit-child); each `measure` commits and sends one more turn of every session.
 */
export async function openDurableLimit(shape: AgentsShape, template: Template): Promise<OpenSubject> {
  const child = fork(compiledChild(LIMIT_CHILD), [], {
    execArgv: [], // plain JavaScript: not this process's tsx
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const fleet = Fleet.start();
  const ask = childAsker(child);
  const close = async () => {
    await fleet.stop();
    await ask({ cmd: "close" }).catch(() => child.kill("SIGKILL"));
  };
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
    let runs = 0;
    const measure = async () => {
      const { cpuMs } = await ask({ cmd: "run" });
      runs += 1;
      const targets: [number, number][] = Array.from({ length: shape.sessions }, (_, i) => [
        i + 1,
        runs * template.length,
      ]);
      await fleet.send({ cmd: "target", targets, timeoutMs: 180_000 }, 200_000);
      const { cpuMs: cpuAfter } = await ask({ cmd: "cpu" });
      const { stats } = await fleet.send({ cmd: "stats" });
      if (stats!.dup > 0 || stats!.gap > 0 || stats!.errors.length > 0)
        throw new Error(`followers saw dup=${stats!.dup} gap=${stats!.gap} ${stats!.errors.join("; ")}`);
      const deliveries = shape.sessions * template.length * shape.followers;
      const spent = cpuAfter! - cpuMs!;
      return {
        value: (deliveries * 1000) / spent,
        cpuMs: spent,
        count: deliveries,
        detail: `${deliveries.toLocaleString("en-US")} deliveries, limit process CPU ${spent.toFixed(0)} ms, exact 1..N`,
      };
    };
    return { measure, close };
  } catch (error) {
    await close();
    throw error;
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
