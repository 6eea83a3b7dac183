import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { pgUrl } from "../contract/backends.js";
import { userMessage } from "../open-store.js";
import { lockTable, waitingOn } from "./held-writes.js";
import { openStoreBehindProxy } from "./store-behind-proxy.js";

/**
 * A read on a pooled connection whose network path goes silent while the read waits: nothing
 * closes the connection, and without a check the read waits for as long as TCP retransmits. The
 * store asks the server on another connection what the read's backend does, as it does for the
 * group commit (`pg-writer-silent.test.ts`): a read waiting on a lock is left alone, one whose
 * answer was lost fails as on a closed connection, and the next read gets another connection.
 */

const cleanups = cleanupsAfterEach();

describe.skipIf(!pgUrl)("PostgreSQL read whose connection goes silent", () => {
  it("leaves a read waiting on a lock alone, and fails it once its answer is lost; the next read answers", async () => {
    const { store, proxy, schema, checks } = await openStoreBehindProxy(cleanups, "smx_read_silent");
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });
    expect((await store.append("s1", [userMessage("one")])).status).toBe("appended");

    // a migration, say, holds the log's table
    const { admin, pid } = await lockTable(cleanups, schema, "events");
    let settled: { events: number } | { error: unknown } | undefined;
    store.readAfter("s1", 0, 1000).then(
      (read) => {
        settled = { events: read.status === "ok" ? read.events.length : -1 };
      },
      (error: unknown) => {
        settled = { error };
      },
    );
    // the read's connection waits on it (the port it comes from: the proxy's side)
    const blocked = async () => (await waitingOn(admin, pid)).map(({ port }) => port);
    await expect.poll(blocked, { timeout: 10_000 }).toHaveLength(1);
    const [readerPort] = await blocked();
    // checked again and again while it waits, and left to wait: its backend runs
    const before = checks();
    await expect.poll(() => checks(), { timeout: 10_000 }).toBeGreaterThanOrEqual(before + 3);
    expect(settled).toBeUndefined();

    // its path goes silent and the lock is let go: the answer is lost
    expect(proxy.silenceAll((_, port) => port === readerPort)).toBe(1);
    await admin.query("COMMIT");
    await expect.poll(() => settled, { timeout: 20_000 }).toBeDefined();
    // a read is idempotent: the caller is told to retry it
    const { error } = settled as { error: SessionmuxError };
    expect(error).toBeInstanceOf(SessionmuxError);
    expect(error.code).toBe("persistence_failure");
    expect((error.cause as Error).message).toMatch(/connection terminated/i);

    const read = await store.readAfter("s1", 0, 1000);
    expect(read.status === "ok" ? read.events.map((event) => event.seq) : read.status).toEqual([1, 2]);
  }, 60_000);

  it("asks about every waiting connection one question at a time: a server that does not answer gets one check connection, not one per wait", async () => {
    const { store, proxy, schema } = await openStoreBehindProxy(cleanups, "smx_read_silent");
    for (const sessionId of ["s1", "s2"]) await store.create({ sessionId, owner: "alice", model: "m" });

    const { admin } = await lockTable(cleanups, schema, "events");
    // the questions go unanswered (their connections' handshake is swallowed), the reads wait on
    proxy.silenceNew((opening) => opening.includes("sessionmux-check"));
    // sampled every 50 ms: an unanswered question holds its connection 300 ms, while the moment
    // one question's connection closes as the next one's opens is shorter than that
    let mostAtOnce = 0;
    const sample = setInterval(() => {
      mostAtOnce = Math.max(mostAtOnce, proxy.silenced);
    }, 50);
    cleanups.push(() => clearInterval(sample));
    const reads = ["s1", "s2"].map((sessionId) =>
      store.readAfter(sessionId, 0, 1000).then(
        () => "answered",
        () => "failed",
      ),
    );
    // two reads on two connections, each watched: each dropped once its question went unanswered
    expect(await Promise.all(reads)).toEqual(["failed", "failed"]);
    clearInterval(sample);
    expect(mostAtOnce).toBe(1);

    proxy.silenceNew();
    await admin.query("COMMIT");
    const read = await store.readAfter("s1", 0, 1000);
    expect(read.status === "ok" ? read.events.map((event) => event.seq) : read.status).toEqual([1]);
  }, 60_000);
});
