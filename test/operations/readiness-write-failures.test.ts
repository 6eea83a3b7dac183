import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { MuxPeer } from "../support/mux-peer.js";
import { readinessHost } from "../support/readiness-host.js";
import { tempDir } from "../support/temp-dir.js";
import { mountTmpfs } from "../support/tmpfs.js";
import { until } from "../support/until.js";

/**
 * `/readyz` while the store's writes fail on storage. The host runs in a child process whose
 * files may not grow past 1 MiB (`ulimit -S -f`: the same EFBIG a full disk's ENOSPC is to
 * SQLite, for this process alone and without root); raising the soft limit again
 * (`prlimit`) is the disk getting room.
 */

const cleanups = cleanupsAfterEach();
const fixture = fileURLToPath(new URL("./fixtures/readiness-host.ts", import.meta.url));
const MAX_RENAMES = 5_000;

async function limitedHost(db: string): Promise<{ pid: number; port: number }> {
  const child = spawn(
    "bash",
    ["-c", 'ulimit -S -f 1024 && exec "$0" "$@"', process.execPath, "--import", "tsx", fixture, db],
    { stdio: ["ignore", "pipe", "ignore"] },
  );
  const exited = new Promise((resolve) => child.once("exit", resolve));
  cleanups.push(async () => {
    child.kill("SIGKILL");
    await exited;
  });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const port = await until(() => /listening (\d+)/.exec(out)?.[1], 60_000, "the host to listen");
  return { pid: child.pid ?? -1, port: Number(port) };
}

describe("/readyz while the store's writes fail on storage", () => {
  it("answers 503 store_writes_failing, and 200 again once storage has room, with no client writing", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const host = await limitedHost(dir.file("sessions.db"));
    const readyz = `http://127.0.0.1:${host.port}/readyz`;
    expect((await fetch(readyz)).status).toBe(200);
    const peer = await MuxPeer.connect(`ws://127.0.0.1:${host.port}/api/remote.mux`, { token: "s" });
    cleanups.push(() => peer.ws.terminate());
    await peer.call("session.create", { sessionId: "full" });

    let failure: SessionmuxError | undefined;
    for (let i = 0; i < MAX_RENAMES && !failure; i++) {
      await peer
        .call("session.rename", { sessionId: "full", title: `${i} ${"x".repeat(500)}` })
        .catch((err) => {
          if (!(err instanceof SessionmuxError)) throw err;
          failure = err;
        });
    }
    expect(failure?.code).toBe("persistence_failure");

    const refused = await until(
      async () => {
        const res = await fetch(readyz);
        return res.status === 503 ? ((await res.json()) as Record<string, unknown>) : undefined;
      },
      15_000,
      "/readyz 503",
    );
    expect(refused).toMatchObject({
      ready: false,
      code: "store_writes_failing",
      reason: "store writes failing",
    });
    // still refused while nothing has changed: the host's own write attempts keep failing
    const again = await fetch(readyz);
    expect(again.status).toBe(503);

    execFileSync("prlimit", ["--pid", String(host.pid), "--fsize=unlimited:"]);
    await until(async () => (await fetch(readyz)).status === 200, 15_000, "/readyz 200 again");
    await peer.call("session.rename", { sessionId: "full", title: "room again" });
  }, 120_000);

  it.runIf(process.getuid?.() === 0)(
    "answers 503 store_writes_failing once another process filled the disk though the host wrote nothing, and 200 once it has room",
    async (ctx) => {
      const mount = mkdtempSync(join(tmpdir(), "sessionmux-sqlite-disk-"));
      cleanups.push(() => rmdirSync(mount));
      if (!mountTmpfs(mount, "size=4m,mode=0700", cleanups)) return ctx.skip("no tmpfs may be mounted here");
      const { readyz } = await readinessHost(join(mount, "sessions.db"), cleanups);
      await until(async () => (await fetch(readyz)).status === 200, 15_000, "/readyz 200");

      // another process takes every free block of the disk
      const filler = join(mount, "filler");
      expect(() => writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024))).toThrow(/ENOSPC/);
      const refused = await until(
        async () => {
          const res = await fetch(readyz);
          const body = res.status === 503 ? ((await res.json()) as Record<string, unknown>) : undefined;
          return body?.code === "check_stale" ? undefined : body;
        },
        15_000,
        "/readyz 503",
      );
      expect(refused).toMatchObject({ ready: false, code: "store_writes_failing" });

      rmSync(filler);
      await until(async () => (await fetch(readyz)).status === 200, 15_000, "/readyz 200 again");
    },
    120_000,
  );
});
