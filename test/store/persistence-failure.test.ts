import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";
import { readWholeLog } from "../support/whole-log.js";
import { delta, openTempStore } from "./open-store.js";

const commitFailureAppender = fileURLToPath(
  new URL("./fixtures/commit-failure-appender.ts", import.meta.url),
);

/** Runs the appender with files limited to `limitKiB`; returns its output lines. */
async function appendUnderFileSizeLimit(dbPath: string, limitKiB: number): Promise<string[]> {
  const child = spawn(
    "bash",
    [
      "-c",
      `ulimit -f ${limitKiB} && exec "$0" "$@"`,
      process.execPath,
      "--import",
      "tsx",
      commitFailureAppender,
      dbPath,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    err += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  if (code !== 0) throw new Error(`appender exited ${code}: ${err}`);
  return out.split("\n").filter(Boolean);
}

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

describe("persistence failure", () => {
  it("rejects every append of a failing batch with persistence_failure and resumes at head+1", async () => {
    current = openTempStore();
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.create({ sessionId: "b", owner: "o", model: "m" });
    const acked = new Map<string, number>([
      ["a", 1],
      ["b", 1],
    ]);
    const noticed: number[] = [];
    store.subscribe("a", (notice) => {
      if (notice.kind === "append") noticed.push(...notice.events.map((event) => event.seq));
    });
    // the file may not grow any more: a full disk
    store.limitSize(0);
    const big = "x".repeat(3_000);
    const rollbacksBefore = store.stats().rollbacks;
    let failures = 0;
    for (let round = 0; round < 200 && failures === 0; round++) {
      const outcomes = await Promise.allSettled(
        ["a", "b", "a", "b"].map((id) => store.append(id, [delta("t", `${round}${big}`)])),
      );
      const ids = ["a", "b", "a", "b"];
      for (const [i, outcome] of outcomes.entries()) {
        if (outcome.status === "fulfilled") {
          if (outcome.value.status !== "appended") throw new Error(outcome.value.status);
          acked.set(ids[i]!, outcome.value.events[0]!.seq);
        } else {
          failures++;
          expect(outcome.reason).toBeInstanceOf(SessionmuxError);
          expect((outcome.reason as SessionmuxError).code).toBe("persistence_failure");
        }
      }
      if (failures > 0) expect(failures).toBe(4);
    }
    expect(failures).toBe(4);
    // one failed transaction for the whole batch: a storage failure is not retried op by op
    expect(store.stats().rollbacks - rollbacksBefore).toBe(1);

    store.limitSize(null);
    for (const id of ["a", "b"]) {
      const outcome = await store.append(id, [delta("t", "space is back")]);
      expect(outcome.status === "appended" && outcome.events[0]!.seq).toBe(acked.get(id)! + 1);
      const read = await readWholeLog(store, id);
      if (read.status !== "ok") throw new Error(read.status);
      expect(read.events.map((event) => event.seq)).toEqual(
        Array.from({ length: acked.get(id)! + 1 }, (_, i) => i + 1),
      );
    }
    // no notice was delivered for an event that never committed
    expect(noticed).toEqual(Array.from({ length: acked.get("a")! }, (_, i) => i + 2));
    // lifted, the cap lets the file grow again: these need far more pages than it had
    const grown = await Promise.all(
      Array.from({ length: 100 }, (_, i) => store.append("b", [delta("t", `${i}${big}`)])),
    );
    expect(grown.every((outcome) => outcome.status === "appended")).toBe(true);
    expect(store.integrityCheck()).toBe("ok");
  });

  it("lets the file grow up to a cap above its size, then fails the write that would pass it", async () => {
    current = openTempStore();
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    // about 256 pages of 4 KiB; the empty database holds a few dozen, each event fills most of one
    store.limitSize(1024 * 1024);
    const big = "x".repeat(3_000);
    let appended = 0;
    let refused: unknown;
    for (let round = 0; round < 60 && refused === undefined; round++) {
      const outcomes = await Promise.allSettled(
        Array.from({ length: 10 }, () => store.append("a", [delta("t", big)])),
      );
      for (const outcome of outcomes) {
        if (outcome.status === "fulfilled") appended++;
        else refused = outcome.reason;
      }
    }
    expect((refused as SessionmuxError | undefined)?.code).toBe("persistence_failure");
    expect(appended).toBeGreaterThan(100);
    expect(appended).toBeLessThan(256);
    const read = await readWholeLog(store, "a");
    expect(read.status === "ok" && read.events.length).toBe(appended + 1);
  });

  it("sends no notice and resolves nothing when COMMIT itself fails", async () => {
    // WAL mode writes the log at COMMIT: with the WAL file capped (ulimit -f), every statement of
    // the transaction succeeds and the COMMIT fails. A notice sent before COMMIT would show here.
    const dir = tempDir("sessionmux-commit-failure-");
    try {
      const dbPath = dir.file("sessions.db");
      const lines = await appendUnderFileSizeLimit(dbPath, 1_024);
      const seqs = (tag: string) =>
        lines.filter((l) => l.startsWith(`${tag} `)).map((l) => Number(l.split(" ")[1]));
      const failures = lines.filter((line) => line.startsWith("fail "));
      expect(lines.at(-1)).toBe("done");
      // the WAL write of the COMMIT failed, not an insert (SQLITE_FULL from a page limit would be)
      expect(failures).toEqual(Array(3).fill("fail persistence_failure SQLITE_IOERR_WRITE"));
      const store = SqliteSessionStore.open(dbPath);
      try {
        expect(store.integrityCheck()).toBe("ok");
        const read = await readWholeLog(store, "a");
        if (read.status !== "ok") throw new Error(read.status);
        const committed = read.events.map((event) => event.seq).filter((seq) => seq > 1);
        expect(committed.length).toBeGreaterThan(10);
        expect(seqs("ack")).toEqual(committed);
        expect(seqs("notice")).toEqual(committed);
      } finally {
        await store.close();
      }
    } finally {
      dir.remove();
    }
  }, 60_000);
});
