import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { readWholeLog } from "../../support/whole-log.js";
import { dropSchema, pgUrl } from "./backends.js";

const fixture = fileURLToPath(new URL("../fixtures/pg-appender.ts", import.meta.url));

/** Starts an appender; `acked` collects every seq it saw acknowledged, per session. */
function startAppender(url: string, schema: string, name: string) {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", fixture, url, schema, name], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const acked = new Map<string, Set<number>>();
  let buffer = "";
  let stderr = "";
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  child.stdout?.on("data", (chunk: Buffer) => {
    buffer += chunk.toString();
    const lines = buffer.split("\n");
    buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line === "ready") markReady();
      const [tag, sessionId, seq] = line.split(" ");
      if (tag === "ack" && sessionId && seq) {
        const set = acked.get(sessionId) ?? new Set<number>();
        set.add(Number(seq));
        acked.set(sessionId, set);
      }
    }
  });
  const exited = new Promise<void>((resolve, reject) =>
    child.on("exit", (code, signal) => {
      if (signal === "SIGKILL" || code === 0) resolve();
      else reject(new Error(`appender ${name} failed (${code}): ${stderr}`));
    }),
  );
  return { child, acked, ready, exited };
}

const suite = pgUrl ? describe : describe.skip;

suite("kill -9 of writing processes [postgres]", () => {
  it("keeps every acknowledged event, contiguous, when two processes writing the same sessions are killed", async () => {
    const url = pgUrl!;
    let totalAcked = 0;
    for (let run = 0; run < 6; run++) {
      const schema = `kill_${randomBytes(6).toString("hex")}`;
      try {
        // the schema exists before the two processes race to create the sessions in it
        await (await PostgresSessionStore.open(url, { schema })).close();
        const writers = [startAppender(url, schema, "a"), startAppender(url, schema, "b")];
        await Promise.all(writers.map((w) => w.ready));
        for (const w of writers) {
          setTimeout(() => w.child.kill("SIGKILL"), 200 + Math.floor(Math.random() * 600));
        }
        await Promise.all(writers.map((w) => w.exited));

        const store = await PostgresSessionStore.open(url, { schema });
        try {
          for (const sessionId of ["k0", "k1", "k2", "k3"]) {
            // a COMMIT a writer sent just before it died still completes; this append takes the
            // session's lock after any such transaction, so the read below sees the settled log
            // (and proves a killed writer left no lock behind)
            const next = await store.append(sessionId, [
              { type: "assistant/delta", data: { turnId: "x", text: "after" } },
            ]);
            if (next.status !== "appended") throw new Error(`${sessionId}: ${next.status}`);
            const read = await readWholeLog(store, sessionId);
            if (read.status !== "ok") throw new Error(`${sessionId}: ${read.status}`);
            expect(read.events.map((event) => event.seq)).toEqual(
              Array.from({ length: read.headSeq }, (_, i) => i + 1),
            );
            expect(next.events[0]!.seq).toBe(read.headSeq);
            for (const [name, w] of [["a", writers[0]!] as const, ["b", writers[1]!] as const]) {
              for (const seq of w.acked.get(sessionId) ?? []) {
                expect(seq).toBeLessThan(read.headSeq);
                // the event at an acknowledged seq is the one that writer appended
                const event = read.events[seq - 1]!;
                if (event.type === "assistant/delta") expect(event.data.turnId.startsWith(name)).toBe(true);
                totalAcked++;
              }
            }
          }
        } finally {
          await store.close();
        }
      } finally {
        await dropSchema(url, schema);
      }
    }
    // the kills landed while appends were being acknowledged, not before the first one
    expect(totalAcked).toBeGreaterThan(6 * 8);
  }, 180_000);
});
