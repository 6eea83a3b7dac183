import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";

export interface CliFollower {
  readonly child: ChildProcess;
  /** Complete stdout lines so far. */
  readonly lines: string[];
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

/** Runs `sessionmux follow <sessionId> --url <url>` as a child process, collecting its lines. */
export function startCliFollower(url: string, sessionId: string, token: string): CliFollower {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "src/cli/main.ts", "follow", sessionId, "--url", url],
    {
      cwd: process.cwd(),
      env: { ...process.env, SESSIONMUX_TOKEN: token },
      stdio: ["ignore", "pipe", "ignore"],
    },
  );
  const exited = once(child, "exit").then(([code]) => code as number | null);
  const lines: string[] = [];
  let partial = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    const parts = (partial + chunk).split("\n");
    partial = parts.pop() ?? "";
    lines.push(...parts);
  });
  return {
    child,
    lines,
    stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}
