import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";
import { dropSchema, pgUrl } from "../contract/backends.js";

/**
 * A `resume` call (a prompt, an answer, a model choice) reads whether its caller dismissed the
 * session before it answers, to restore it. The database failing that read is the call's
 * retryable `persistence_failure`, as the restore's write failing is (docs/protocol-v1.md), not
 * an `internal_error` a client would not retry.
 */

const cleanups = cleanupsAfterEach();

describe.skipIf(!pgUrl)("PostgreSQL: the dismissal read of a resume call", () => {
  it("fails persistence_failure when the database cannot be reached", async () => {
    const url = new URL(pgUrl!);
    const proxy = await startTcpProxy(Number(url.port || 5432));
    cleanups.push(() => proxy.stop());
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const schema = `smx_dismiss_read_${randomBytes(4).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl!, schema));
    const store = await PostgresSessionStore.open(url.toString(), { schema, maxConnections: 2 });
    cleanups.push(() => store.close().catch(() => undefined));
    await store.create({ sessionId: "s1", owner: "alice", model: "demo" });
    await store.dismiss("s1", "alice", Date.now());
    expect(await store.isDismissed("s1", "alice")).toBe(true);

    await proxy.stop();

    const failed = await store.isDismissed("s1", "alice").then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(SessionmuxError);
    expect((failed as SessionmuxError).code).toBe("persistence_failure");
  });
});
