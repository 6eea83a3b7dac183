import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { KEPT_AFTER_IDLE_MS } from "../../../src/store/postgres/pg-group-commit.js";
import type { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { readWholeLog } from "../../support/whole-log.js";
import { pgUrl } from "../contract/backends.js";
import { userMessage } from "../open-store.js";
import { openStoreBehindProxy } from "./store-behind-proxy.js";

/**
 * After a network blip, a pool still holds idle connections whose sockets died meanwhile, and the
 * next statement handed one fails at once though the database is back. A write transaction whose
 * COMMIT never went out committed nothing, so the group commit runs it again on the next
 * connection, and every caller of the batch is answered once; a renewal, a fenced UPDATE whose
 * second run does what its first did, is sent again. A transaction whose COMMIT went out, and
 * may have committed, is not run again.
 */

const cleanups = cleanupsAfterEach();

/** The pooled connections (`sessionmux`), by the `application_name` their startup message names. */
const pooled = (opening: Buffer) => opening.includes("application_name\0sessionmux\0");

/** What a write settled with: its value, or the code of its typed error. */
function outcome<T>(write: Promise<T>): Promise<T | { code: string } | { untyped: string }> {
  return write.catch((err: unknown) =>
    err instanceof SessionmuxError ? { code: err.code } : { untyped: String(err) },
  );
}

/** The texts of the user messages in the log, asserting its seqs run 1, 2, 3 … with no gap. */
async function contiguousTexts(store: PostgresSessionStore, sessionId: string): Promise<string[]> {
  const read = await readWholeLog(store, sessionId);
  if (read.status !== "ok") throw new Error(read.status);
  expect(read.events.map((event) => event.seq)).toEqual(read.events.map((_, i) => i + 1));
  return read.events.flatMap((event) => (event.type === "user/message" ? [event.data.text] : []));
}

/** Lets the group commit's connection idle past the bound of a batch on kept states. */
const idleWriter = () => new Promise((resolve) => setTimeout(resolve, KEPT_AFTER_IDLE_MS + 100));

describe.skipIf(!pgUrl)("PostgreSQL writes on pooled connections that died while idle", () => {
  it("run a batch of appends again on the next connection: each caller answered once, the log contiguous", async () => {
    const { store, proxy } = await openStoreBehindProxy(cleanups, "smx_write_idle_lost");
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });
    expect((await store.append("s1", [userMessage("one")])).status).toBe("appended");
    await idleWriter();
    // the group commit's connection and the read pool's, idle, end at the server's side unseen
    expect(proxy.cutAllUnnoticed(pooled)).toBeGreaterThanOrEqual(2);

    // issued in one tick: one batch
    const written = await Promise.all(
      ["two", "three", "four"].map((text) => outcome(store.append("s1", [userMessage(text)]))),
    );
    expect(written.map((answer) => (answer as { status?: string }).status)).toEqual([
      "appended",
      "appended",
      "appended",
    ]);
    // one seq each, in the order issued, right after the one before the blip
    const seqs = written.map((answer) => (answer as { events: { seq: number }[] }).events[0]!.seq);
    expect(seqs).toEqual([seqs[0], seqs[0]! + 1, seqs[0]! + 2]);
    expect(await contiguousTexts(store, "s1")).toEqual(["one", "two", "three", "four"]);
  }, 30_000);

  it("renew a lease on the next connection", async () => {
    const { store, proxy } = await openStoreBehindProxy(cleanups, "smx_renew_idle_lost");
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });
    const acquired = await store.acquireLease("s1", "host-a", 60_000);
    if (acquired.status !== "acquired") throw new Error(acquired.status);
    // the read pool's connections (renewals run there) idle
    await expect.poll(() => store.poolStats().reads.idle).toBeGreaterThanOrEqual(1);
    expect(proxy.cutAllUnnoticed(pooled)).toBeGreaterThanOrEqual(1);

    expect(await outcome(store.renewLeases("host-a", [acquired.lease], 60_000))).toEqual({
      renewed: [acquired.lease],
      lost: [],
    });
  }, 30_000);

  it("run a batch again after a blip, but not one whose COMMIT reached the server though its connection had idled", async () => {
    const { store, proxy, cutNextCommitAnswer, cutAtCommit } = await openStoreBehindProxy(
      cleanups,
      "smx_commit_lost",
    );
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });
    expect((await store.append("s1", [userMessage("one")])).status).toBe("appended");
    await idleWriter();
    expect(proxy.cutAllUnnoticed(pooled)).toBeGreaterThanOrEqual(1);
    expect(await outcome(store.append("s1", [userMessage("two")]))).toMatchObject({ status: "appended" });
    await idleWriter();

    cutNextCommitAnswer();
    expect(await outcome(store.append("s1", [userMessage("three")]))).toEqual({
      code: "persistence_failure",
    });
    expect(cutAtCommit()).toBeGreaterThanOrEqual(1);
    // committed once, by the one run
    expect(await contiguousTexts(store, "s1")).toEqual(["one", "two", "three"]);
  }, 30_000);
});
