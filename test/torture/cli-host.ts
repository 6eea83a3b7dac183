import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));

export interface CliHost {
  readonly child: ChildProcess;
  readonly port: number;
  readonly wsUrl: string;
  /** SIGKILL, resolved once the process is gone. */
  kill9(): Promise<void>;
}

/** `sessionmux serve` as a child process, for scenarios that must kill the host for real. */
export async function spawnCliHost(options: {
  dbPath: string;
  token: string;
  extra?: string[];
  /** A command the host runs under, e.g. a system-call tracer: `[tool, ...toolArgs]`. */
  wrapper?: string[];
  /** Options for node itself, before the host's script (e.g. `--import` of a probe). */
  nodeArgs?: string[];
}): Promise<CliHost> {
  const [command, ...prefix] = [...(options.wrapper ?? []), process.execPath];
  const child = spawn(
    command!,
    [
      ...prefix,
      ...(options.nodeArgs ?? []),
      "--import",
      "tsx",
      MAIN,
      "serve",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--db",
      options.dbPath,
      "--token",
      options.token,
      "--log-level",
      "error",
      ...(options.extra ?? []),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`host did not start: ${stderr}`)), 30_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`host exited ${code}: ${stderr}`));
    });
  });
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
  return {
    child,
    port,
    wsUrl: `ws://127.0.0.1:${port}/api/remote.mux`,
    async kill9() {
      child.kill("SIGKILL");
      await exited;
    },
  };
}
