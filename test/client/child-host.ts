import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";

/** A port on 127.0.0.1 that was free a moment ago (the host is restarted on the same one). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return address.port;
}

export interface ChildHost {
  readonly child: ChildProcess;
  readonly url: string;
  /** SIGKILL, then wait for the process to be gone. */
  kill(): Promise<void>;
}

/** Runs `sessionmux serve` as a child process and resolves once it printed `listening on`. */
export async function startChildHost(options: {
  port: number;
  dbPath: string;
  token: string;
}): Promise<ChildHost> {
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "src/cli/main.ts",
      "serve",
      "--port",
      String(options.port),
      "--db",
      options.dbPath,
      "--token",
      options.token,
      "--log-level",
      "warn",
    ],
    { cwd: process.cwd(), stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  const exited = once(child, "exit");
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      if (output.includes("listening on")) {
        child.stdout?.off("data", onData);
        resolve();
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    exited.then(() => reject(new Error(`host exited before listening: ${output}`)), reject);
  });
  child.stdout?.resume();
  child.stderr?.resume();
  return {
    child,
    url: `ws://127.0.0.1:${options.port}/api/remote.mux`,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}
