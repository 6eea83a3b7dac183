import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { pinFollowers, placeFollowers } from "./cpu-pinning.js";
import { withDeadline } from "./deadline.js";
import type { FleetCommand, FleetConnect, FleetReply } from "./fleet-protocol.js";
import type { FanoutSubject } from "./subject.js";

const CHILD = fileURLToPath(new URL("./fleet-child.ts", import.meta.url));

/** Follower processes handed back by a finished scenario, reset, for the next one to take. */
const idle: ChildProcess[] = [];

/** A follower fleet in a child process; every command is bounded in time. */
export class Fleet {
  private seq = 0;
  private readonly waiting = new Map<number, (reply: FleetReply) => void>();

  private readonly onMessage = (message: { seq: number; reply: FleetReply }) => {
    this.waiting.get(message.seq)?.(message.reply);
    this.waiting.delete(message.seq);
  };

  private constructor(private readonly child: ChildProcess) {
    child.on("message", this.onMessage);
  }

  /**
   * A follower process: one a scenario before handed back (reset: no socket, no state), or a new
   * one. Starting one takes 1–2 s of loading its TypeScript, and each scenario set up three or four
   * side by side, several seconds of every scenario that measured nothing.
   */
  static start(): Fleet {
    const kept = idle.pop();
    if (kept) {
      kept.ref();
      kept.channel?.ref();
      placeFollowers(kept.pid);
      return new Fleet(kept);
    }
    const child = fork(CHILD, [], {
      execArgv: ["--import", "tsx", "--expose-gc"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    pinFollowers(child.pid);
    return new Fleet(child);
  }

  /** Ends the follower processes kept for reuse (a run's end; unreferenced, they never hold it open). */
  static async closeIdle(): Promise<void> {
    const kept = idle.splice(0);
    await Promise.all(kept.map((child) => new Fleet(child).end()));
  }

  async send(command: FleetCommand, timeoutMs = 120_000): Promise<FleetReply> {
    const seq = ++this.seq;
    const reply = new Promise<FleetReply>((resolve) => this.waiting.set(seq, resolve));
    this.child.send({ seq, command });
    const answer = await withDeadline(reply, timeoutMs, `fleet ${command.cmd}`);
    if (!answer.ok) throw new Error(`fleet ${command.cmd}: ${answer.error ?? "failed"}`);
    return answer;
  }

  /** Connects `count` followers to a subject with the subject's own wire kind, address and token. */
  connectTo(
    subject: Pick<FanoutSubject, "kind" | "url" | "token">,
    connect: Omit<FleetConnect, "cmd" | "kind" | "url" | "token">,
  ): Promise<FleetReply> {
    return this.send({
      cmd: "connect",
      kind: subject.kind,
      url: subject.url,
      ...(subject.token ? { token: subject.token } : {}),
      ...connect,
    });
  }

  /**
   * Closes every follower and hands the process back for the next scenario; one that does not
   * answer its reset is ended instead.
   */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    try {
      await this.send({ cmd: "reset" }, 5_000);
    } catch {
      await this.end();
      return;
    }
    this.child.off("message", this.onMessage);
    this.child.channel?.unref();
    this.child.unref();
    idle.push(this.child);
  }

  private async end(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    await this.send({ cmd: "close" }, 5_000).catch(() => this.child.kill("SIGKILL"));
    await withDeadline(exited, 5_000, "fleet exit").catch(() => this.child.kill("SIGKILL"));
  }
}
