import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { PHASE_TIMEOUT_MS } from "./fixture.js";

export type Reply = { op: string; [key: string]: unknown };

/**
 * The benchmark's clients in a child process (`mux.bench.ts --clients`, see `mux-bench-clients.ts`),
 * so `process.cpuUsage()` in this process is the server's CPU alone.
 */
export class Clients {
  readonly #child: ChildProcess;
  readonly #replies: Reply[] = [];
  constructor() {
    const entry = fileURLToPath(new URL("../mux.bench.ts", import.meta.url));
    this.#child = fork(entry, ["--clients"], { execArgv: process.execArgv });
    this.#child.on("message", (m) => this.#replies.push(m as Reply));
  }
  send(command: Record<string, unknown>): void {
    this.#child.send(command);
  }
  async reply(op: string, timeoutMs = PHASE_TIMEOUT_MS): Promise<Reply> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.#replies.findIndex((r) => r.op === op || r.op === "failed");
      if (i >= 0) {
        const [reply] = this.#replies.splice(i, 1) as [Reply];
        if (reply.op === "failed") throw new Error(`clients failed: ${String(reply.message)}`);
        return reply;
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${op}`);
      await new Promise((r) => setTimeout(r, 2));
    }
  }
  kill(): void {
    this.#child.kill();
  }
}
