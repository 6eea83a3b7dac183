import { execFile, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../..", import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `sessionmux <args>` from the sources to its end, however it exits; as the user `as` names
 * when given (a test running as root, whom file modes do not stop, runs it as `nobody`).
 */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
  as?: { uid: number; gid: number },
): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "src/cli/main.ts", ...args],
      { cwd: repo, env: { ...process.env, ...env }, timeout: 60_000, ...as },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/**
 * Runs `sessionmux <args>` under strace, recording the system calls named in `syscalls` (with the
 * paths of their descriptors) into `traceFile`; resolves with the exit code.
 */
export function runCliTraced(args: string[], traceFile: string, syscalls: string[]): Promise<number> {
  const trace = ["-f", "-qq", "-yy", "-e", `trace=${syscalls.join(",")}`, "-o", traceFile];
  return new Promise((resolve) => {
    execFile(
      "strace",
      [...trace, process.execPath, "--import", "tsx", "src/cli/main.ts", ...args],
      { cwd: repo, timeout: 60_000 },
      (error) => resolve(error ? (typeof error.code === "number" ? error.code : 1) : 0),
    );
  });
}

/**
 * Starts `sessionmux serve`; resolves with its console line and process id once it listens, or its
 * output once it exits.
 */
export function startServe(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string; exited?: number; pid: number; stop(): Promise<string> }> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "serve", ...args], {
    cwd: repo,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number>((resolve) => child.once("exit", (code) => resolve(code ?? 1)));
  const stop = async () => {
    child.kill("SIGTERM");
    await exited;
    return stderr;
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`serve did not start: ${stdout}${stderr}`));
    }, 60_000);
    const onData = () => {
      if (/console: .*\n/.test(stdout)) {
        clearTimeout(timer);
        child.stdout.off("data", onData);
        resolve({ stdout, stderr, pid: child.pid ?? -1, stop });
      }
    };
    child.stdout.on("data", onData);
    void exited.then((code) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, exited: code, pid: child.pid ?? -1, stop: async () => stderr });
    });
  });
}

/** Starts `sessionmux <args>` without waiting for it, for a test that kills it part way. */
export function spawnCli(args: string[]): {
  pid: number;
  exited: Promise<number | null>;
  kill(): Promise<number | null>;
} {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
    cwd: repo,
    stdio: "ignore",
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    pid: child.pid ?? -1,
    exited,
    kill: async () => {
      child.kill("SIGKILL");
      return exited;
    },
  };
}
