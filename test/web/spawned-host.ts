import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { tempDir } from "../support/temp-dir.js";
import { buildConsole } from "./console-build.js";

const script = fileURLToPath(new URL("./host-process.ts", import.meta.url));
const root = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Starts the host in a child process (so a test can SIGKILL it like a crash) and resolves with its
 * port once it listens. Port 0 picks a free one; pass the old port to restart on it.
 */
export async function spawnHost(
  port: number,
  dbPath: string,
  token: string,
  webRoot: string,
): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ["--import", "tsx", script, String(port), dbPath, token, webRoot], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  const ready = new Promise<number>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /ready (\d+)/.exec(out);
      if (match) resolve(Number(match[1]));
    });
    child.once("exit", (code) => reject(new Error(`host exited early with ${code}`)));
  });
  return { child, port: await ready };
}

export async function killHost(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGKILL");
  await exited;
}

/**
 * For a file whose tests run hosts as child processes serving a fresh console build, on one
 * database file (`dbPath`) they may be restarted on: `start(port)` spawns one (port 0 picks a
 * free one) and every host started is killed, the build and the folder removed, after the file.
 */
export function useSpawnedHosts(token: string): {
  readonly dbPath: string;
  start(port: number): Promise<{ child: ChildProcess; port: number }>;
} {
  const dir = tempDir();
  let webRoot: string | undefined;
  let removeBuild: (() => void) | undefined;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    const built = await buildConsole();
    webRoot = built.webRoot;
    removeBuild = built.remove;
  });
  afterAll(async () => {
    for (const child of children) await killHost(child);
    removeBuild?.();
    dir.remove();
  });
  return {
    dbPath: dir.file("sessions.db"),
    async start(port) {
      if (!webRoot) throw new Error("the console is built in beforeAll");
      const started = await spawnHost(port, dir.file("sessions.db"), token, webRoot);
      children.push(started.child);
      return started;
    },
  };
}
