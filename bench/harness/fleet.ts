import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { compiledChild } from "./compiled-child.js";
import { pinFollowers } from "./cpu-pinning.js";
import { withDeadline } from "./deadline.js";
import type { FleetCommand, FleetConnect, FleetReply } from "./fleet-protocol.js";
import type { FanoutSubject } from "./subject.js";

const CHILD = fileURLToPath(new URL("./fleet-child.ts", import.meta.url));

/** A follower fleet in a child process; every command is bounded in time. */
export class Fleet {
  private seq = 0;
  private readonly waiting = new Map<number, (reply: FleetReply) => void>();

  private constructor(private readonly child: ChildProcess) {
    child.on("message", (message: { seq: number; reply: FleetReply }) => {
      this.waiting.get(message.seq)?.(message.reply);
      this.waiting.delete(message.seq);
    });
  }

  static start(): Fleet {
    // plain JavaScript: not this process's tsx
    const child = fork(compiledChild(CHILD), [], {
      execArgv: [],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    pinFollowers(child.pid);
    return new Fleet(child);
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

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    await this.send({ cmd: "close" }, 5_000).catch(() => this.child.kill("SIGKILL"));
    await withDeadline(exited, 5_000, "fleet exit").catch(() => this.child.kill("SIGKILL"));
  }
}
