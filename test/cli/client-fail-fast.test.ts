import { spawn } from "node:child_process";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { freePort } from "../client/child-host.js";
import { startFakePeer } from "../client/fake-peer.js";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../support/host.js";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

/** Runs the CLI with a 60 s `--timeout`, so only failing fast can finish within the test timeout. */
async function run(
  args: string[],
  url: string,
  token = ADMIN_TOKEN,
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "src/cli/main.ts", ...args, "--url", url, "--timeout", "60000"],
    {
      cwd: process.cwd(),
      env: { ...process.env, SESSIONMUX_TOKEN: token },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let stderr = "";
  let stdout = "";
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  const [code] = (await once(child, "exit")) as [number | null];
  return { code, stderr, stdout };
}

describe("CLI client commands fail fast", () => {
  it("when nothing listens at the URL, with a message naming it", async () => {
    const url = `ws://127.0.0.1:${await freePort()}/api/remote.mux`;
    const result = await run(["list"], url);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(`cannot reach a sessionmux host at ${url}`);
    expect(result.stdout).toBe("");
  }, 20_000);

  it("when the path is wrong (HTTP 404), for one-shot and streaming commands alike", async () => {
    const url = host.wsUrl.replace("/api/remote.mux", "/remote.mux");
    for (const args of [["list"], ["follow", "any"], ["control"]]) {
      const result = await run(args, url);
      expect(result.code, args.join(" ")).not.toBe(0);
      expect(result.stderr).toContain("not_found");
      expect(result.stderr).toContain("HTTP 404");
    }
  }, 30_000);

  it("when the token's principal holds the most sockets the host allows (429), for one-shot and streaming commands alike", async () => {
    const crowded = await startTestHost({ principals: { maxSocketsPerPrincipal: 1 } });
    const holder = createNodeClient({ url: crowded.wsUrl, token: ALICE_TOKEN });
    try {
      await holder.list();
      for (const args of [["list"], ["follow", "any"], ["control"]]) {
        const result = await run(args, crowded.wsUrl, ALICE_TOKEN);
        expect(result.code, args.join(" ")).not.toBe(0);
        expect(result.stderr).toMatch(/^error: too_many_connections: .*\(HTTP 429\)/m);
        expect(result.stdout).toBe("");
      }
    } finally {
      await holder.close();
      await crowded.dispose();
    }
  }, 30_000);

  it("when the host speaks another protocol version, for one-shot and streaming commands alike", async () => {
    const peer = await startFakePeer({ protocol: () => 2 });
    try {
      const { url } = peer;
      for (const args of [["list"], ["follow", "any"], ["control"]]) {
        const result = await run(args, url);
        expect(result.code, args.join(" ")).not.toBe(0);
        // the command's own error, not only the client's warning about the hello
        expect(result.stderr).toMatch(/^error: unsupported_protocol: the host speaks protocol 2\b/m);
        expect(result.stderr).not.toContain("cannot reach");
      }
    } finally {
      await peer.stop();
    }
  }, 30_000);
});
