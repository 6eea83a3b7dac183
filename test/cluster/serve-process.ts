import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));

export interface ServeProcess {
  readonly hostId: string;
  readonly child: ChildProcess;
  readonly port: number;
  /** `http://127.0.0.1:port` */
  readonly url: string;
  readonly wsUrl: string;
  /** Everything the process wrote to stderr (its pino log) so far. */
  readonly log: () => string;
  /** SIGKILL, resolved once the process is gone. */
  kill9(): Promise<void>;
  /** SIGSTOP / SIGCONT: a paused process keeps its sockets and connections but runs nothing. */
  pause(): void;
  resume(): void;
  /** SIGTERM (a graceful stop), then SIGKILL past `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** `sessionmux serve` as a child process on 127.0.0.1 (port 0), from the sources through tsx. */
export async function spawnServe(options: {
  db: string;
  hostId: string;
  token: string;
  args?: string[];
  env?: Record<string, string>;
}): Promise<ServeProcess> {
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      MAIN,
      "serve",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--db",
      options.db,
      "--host-id",
      options.hostId,
      "--token",
      options.token,
      ...(options.args ?? []),
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...options.env } },
  );
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`serve ${options.hostId} did not start: ${stderr}`));
    }, 60_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (match && /console: /.test(out)) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`serve ${options.hostId} exited ${code}: ${stderr}`));
    });
  });
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  return {
    hostId: options.hostId,
    child,
    port,
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}/api/remote.mux`,
    log: () => stderr,
    async kill9() {
      if (!gone()) child.kill("SIGKILL");
      await exited;
    },
    pause() {
      child.kill("SIGSTOP");
    },
    resume() {
      child.kill("SIGCONT");
    },
    async stop(graceMs = 10_000) {
      if (gone()) return;
      child.kill("SIGCONT");
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
