import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { pgUrl } from "../contract/backends.js";
import { userMessage } from "../open-store.js";
import { lockTable, waitingOn } from "./held-writes.js";
import { openStoreBehindProxy } from "./store-behind-proxy.js";

/**
 * A read the database could not answer (its connection refused, or ended by the server while the
 * read waited) is the retryable `persistence_failure` a client retries, a read being idempotent,
 * not pg's own error, which a client would be told as a non-retryable `internal_error`.
 */

const cleanups = cleanupsAfterEach();

/** The code a read rejected with, and the database's error code under it; `untyped` when it was not a typed error. */
async function failure(read: Promise<unknown>): Promise<unknown> {
  const err = await read.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!(err instanceof SessionmuxError)) return { untyped: String(err) };
  return {
    code: err.code,
    retryable: err.retryable,
    postgres: (err.data as { postgres?: string })?.postgres,
  };
}

describe.skipIf(!pgUrl)("PostgreSQL reads the database cannot answer", () => {
  it("reject persistence_failure, every read the store serves, while the database cannot be reached", async () => {
    const { store, proxy } = await openStoreBehindProxy(cleanups, "smx_read_failure");
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });
    expect((await store.append("s1", [userMessage("one")])).status).toBe("appended");
    const attachmentId = await store.putAttachment({
      owner: "alice",
      name: "a.txt",
      type: "text/plain",
      bytes: new Uint8Array([1, 2, 3]),
    });

    await proxy.stop();

    const reads: Record<string, () => Promise<unknown>> = {
      header: () => store.header("s1"),
      projection: () => store.projection("s1"),
      page: () => store.page("s1", { limit: 10 }),
      readAfter: () => store.readAfter("s1", 0, 10),
      readAfterEncoded: () => store.readAfterEncoded("s1", 0, 10, 10),
      list: () => store.list({ limit: 10 }),
      search: () => store.search("one", 10),
      queue: () => store.queue("s1"),
      queuedBytes: () => store.queuedBytes("alice"),
      interaction: () => store.interaction("i1"),
      turnInteractions: () => store.turnInteractions("s1", "t1"),
      liveStatePage: () => store.liveStatePage(null, 10),
      leaseHolder: () => store.leaseHolder("s1"),
      leasePage: () => store.leasePage(null, 10),
      unownedQueues: () => store.unownedQueues(10),
      isDismissed: () => store.isDismissed("s1", "alice"),
      isRetired: () => store.isRetired("s1"),
      ownerStoredBytes: () => store.ownerStoredBytes("alice"),
      findPrompt: () => store.findPrompt("s1", "m1"),
      getAttachment: () => store.getAttachment(attachmentId),
      attachmentInfo: () => store.attachmentInfo(attachmentId),
      attachmentChunks: async () => {
        for await (const _ of store.attachmentChunks(attachmentId));
      },
      storeIdentity: () => store.storeIdentity(),
    };
    const failures: Record<string, unknown> = {};
    for (const [name, read] of Object.entries(reads)) failures[name] = await failure(read());
    const expected = Object.fromEntries(
      Object.keys(reads).map((name) => [
        name,
        expect.objectContaining({ code: "persistence_failure", retryable: true }),
      ]),
    );
    expect(failures).toEqual(expected);
  }, 30_000);

  it("rejects persistence_failure when the server ends the read's connection while it waits", async () => {
    const { store, schema } = await openStoreBehindProxy(cleanups, "smx_read_failure");
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });
    const { admin, pid } = await lockTable(cleanups, schema, "events");
    const read = failure(store.readAfter("s1", 0, 10));
    const blocked = async () => (await waitingOn(admin, pid)).map(({ pid }) => pid);
    await expect.poll(blocked, { timeout: 10_000 }).toHaveLength(1);
    // an operator (or a failover) ends the backend: FATAL 57P01, and the connection closes
    const [reader] = await blocked();
    await admin.query("SELECT pg_terminate_backend($1)", [reader]);
    expect(await read).toEqual({ code: "persistence_failure", retryable: true, postgres: "57P01" });
    await admin.query("COMMIT");
  }, 30_000);
});
