import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { chmodSync, copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("../..", import.meta.url));
const CLI = ["--import", "tsx", join(repo, "src/cli/main.ts")];

function has(command: string, args: string[]): boolean {
  try {
    execFileSync(command, args, { stdio: "ignore", timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}
const hasSystemdAnalyze = has("systemd-analyze", ["--version"]);
const hasContainerRuntime = has("docker", ["info"]);

const cleanups = cleanupsAfterEach();

/** Starts a host command and resolves with its URL once it listens. */
async function started(
  argv: string[],
  env: Record<string, string>,
): Promise<{ url: string; child: ChildProcess; output: () => string }> {
  const [command, ...args] = argv;
  if (!command) throw new Error("empty command");
  const child = spawn(command, args, {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
  cleanups.push(() => {
    if (child.exitCode === null) child.kill("SIGKILL");
  });
  const deadline = Date.now() + 60_000;
  for (;;) {
    const url = /listening on (\S+)/.exec(output)?.[1];
    if (url) return { url, child, output: () => output };
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`did not start: ${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function stopsCleanly(child: ChildProcess, output: () => string): Promise<void> {
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const [code] = (await exited) as [number | null];
  expect(code).toBe(0);
  expect(output()).toContain('"msg":"shutdown complete"');
}

describe("deploy/sessionmux.service", () => {
  const unit = readFileSync(join(repo, "deploy/sessionmux.service"), "utf8");
  const values = (key: string) =>
    unit.split("\n").flatMap((line) => (line.startsWith(`${key}=`) ? [line.slice(key.length + 1)] : []));

  it.skipIf(!hasSystemdAnalyze)("passes systemd-analyze verify", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const copy = dir.file("sessionmux.service");
    copyFileSync(join(repo, "deploy/sessionmux.service"), copy);
    const { stderr } = await run("systemd-analyze", ["verify", copy]);
    expect(stderr.split("\n").filter((line) => line.includes("sessionmux.service"))).toEqual([]);
  });

  it("starts with its ExecStart and Environment, answers /readyz, stops on SIGTERM", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    // `sessionmux` on PATH as `npm install -g` would put it, running this checkout
    const bin = dir.file("sessionmux");
    writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" ${CLI.map((a) => `"${a}"`).join(" ")} "$@"\n`);
    chmodSync(bin, 0o755);
    const env: Record<string, string> = {};
    for (const assignment of values("Environment")) {
      const eq = assignment.indexOf("=");
      env[assignment.slice(0, eq)] = assignment.slice(eq + 1);
    }
    expect(env.SESSIONMUX_DB).toMatch(/^\/var\/lib\/sessionmux\//);
    // StateDirectory= is /var/lib/sessionmux under systemd; a temp folder stands in for it here
    env.SESSIONMUX_DB = (env.SESSIONMUX_DB ?? "").replace("/var/lib/sessionmux", dir.path);
    env.SESSIONMUX_PORT = "0";
    const [execStart] = values("ExecStart");
    const host = await started((execStart ?? "").split(" "), {
      ...env,
      PATH: `${dir.path}:${process.env.PATH}`,
    });
    expect((await fetch(`${host.url}/readyz`)).status).toBe(200);
    await stopsCleanly(host.child, host.output);
  });
});

describe("Dockerfile", () => {
  const dockerfile = readFileSync(join(repo, "Dockerfile"), "utf8").replace(/\\\n\s*/g, "");
  const runtimeStage = dockerfile.slice(dockerfile.lastIndexOf("\nFROM "));
  const execForm = (instruction: string) => {
    const line = runtimeStage.split("\n").find((l) => l.startsWith(`${instruction} `));
    const json = line?.slice(line.indexOf("["));
    return json ? (JSON.parse(json) as string[]) : [];
  };

  it.skipIf(!hasContainerRuntime)("builds and runs healthy", async () => {
    await run("docker", ["build", "-t", "sessionmux-test", repo], { timeout: 900_000 });
    const { stdout } = await run("docker", ["run", "--rm", "-d", "-p", "127.0.0.1::8787", "sessionmux-test"]);
    const id = stdout.trim();
    cleanups.push(async () => void (await run("docker", ["rm", "-f", id])));
    const port = (await run("docker", ["port", id, "8787"])).stdout.trim().split(":").at(-1);
    const deadline = Date.now() + 60_000;
    while ((await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.status !== 200) {
      if (Date.now() > deadline) throw new Error("container did not become healthy");
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  });

  it("runs its CMD with its ENV as the non-root user's data volume would, and its HEALTHCHECK passes", async () => {
    expect(runtimeStage).toMatch(/^USER node$/m);
    expect(runtimeStage).toMatch(/^VOLUME \["\/data"\]$/m);
    const env: Record<string, string> = {};
    const envLine = runtimeStage.split("\n").find((l) => l.startsWith("ENV "));
    for (const [, key, value] of (envLine ?? "").matchAll(/(\w+)=(\S+)/g)) env[key ?? ""] = value ?? "";
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    // the volume at /data is a temp folder here; the built entry point is run from the sources
    env.SESSIONMUX_DB = (env.SESSIONMUX_DB ?? "").replace("/data", dir.path);
    env.SESSIONMUX_HOST = "127.0.0.1";
    env.SESSIONMUX_PORT = "0";
    const cmd = execForm("CMD").flatMap((arg) => (arg === "dist/src/cli/main.js" ? CLI : [arg]));
    expect(cmd.at(-1)).toBe("serve");
    const host = await started(
      cmd.map((arg) => (arg === "node" ? process.execPath : arg)),
      env,
    );
    const [node, ...check] = execForm(
      "HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD",
    );
    expect(node).toBe("node");
    const port = new URL(host.url).port;
    await run(process.execPath, check, { env: { ...process.env, SESSIONMUX_PORT: port }, timeout: 30_000 });
    await stopsCleanly(host.child, host.output);
  });
});
