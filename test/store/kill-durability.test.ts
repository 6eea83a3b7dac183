import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";
import { readWholeLog } from "../support/whole-log.js";

const fixture = fileURLToPath(new URL("./fixtures/appender.ts", import.meta.url));

/** Runs the appender, SIGKILLs it `killAfterMs` after it is ready; returns the highest acked seq per session. */
async function runAndKill(dbPath: string, killAfterMs: number): Promise<Map<string, number>> {
  const child = spawn(process.execPath, ["--import", "tsx", fixture, dbPath], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const acked = new Map<string, number>();
  let buffer = "";
  let stderr = "";
  let timer: NodeJS.Timeout | undefined;
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdout.on("data", (chunk: Buffer) => {
    buffer += chunk.toString();
    const lines = buffer.split("\n");
    buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "ready") timer = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
      const [tag, sessionId, seq] = line.split(" ");
      if (tag === "ack" && sessionId && seq)
        acked.set(sessionId, Math.max(acked.get(sessionId) ?? 0, Number(seq)));
    }
  });
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  clearTimeout(timer);
  if (exit.signal !== "SIGKILL" && exit.code !== 0) throw new Error(`appender failed: ${stderr}`);
  return acked;
}

describe("kill -9 durability", () => {
  it("keeps every acknowledged event, without gaps, through 20 random kills", async () => {
    const dir = tempDir("sessionmux-kill-");
    try {
      let totalAcked = 0;
      for (let run = 0; run < 20; run++) {
        // a file per run keeps every run the same size; recovery happens on the reopen below
        const dbPath = dir.file(`run-${run}.db`);
        const acked = await runAndKill(dbPath, 300 + Math.floor(Math.random() * 500));
        expect(acked.size).toBeGreaterThan(0);
        const store = SqliteSessionStore.open(dbPath);
        try {
          expect(store.integrityCheck()).toBe("ok");
          for (const [sessionId, ackedSeq] of acked) {
            const read = await readWholeLog(store, sessionId);
            if (read.status !== "ok") throw new Error(`${sessionId}: ${read.status}`);
            expect(read.headSeq).toBeGreaterThanOrEqual(ackedSeq);
            expect(read.events.length).toBe(read.headSeq);
            expect(read.events.every((event, i) => event.seq === i + 1)).toBe(true);
            totalAcked += ackedSeq;
          }
        } finally {
          await store.close();
        }
        rmSync(dbPath);
      }
      // the kills landed while appends were being acknowledged, not before the first one
      expect(totalAcked).toBeGreaterThan(20 * 4);
    } finally {
      dir.remove();
    }
  }, 120_000);
});
