import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import type { ForwardOutcome } from "../../../src/store/call-inbox.js";
import { PgCallInbox } from "../../../src/store/postgres/pg-call-inbox.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { call, NO_POLL } from "./call-inbox-rows.js";

/**
 * A statement of the call inbox's pool (a forwarded call's INSERT, its reply's read) whose
 * connection's network path goes silent: nothing closes the connection, and without a check the
 * call waits for as long as TCP retransmits (over the proxy, for ever). The inbox's pool is
 * watched as the store's reads are (`pg-read-silent.test.ts`): the call fails as on a closed
 * connection, and a new connection whose handshake the silent path swallows fails too, within
 * twice the check's interval.
 */

const cleanups = cleanupsAfterEach();

/** The pooled connections (`sessionmux`), by the `application_name` their startup message names. */
const pooled = (opening: Buffer) => opening.includes("application_name\0sessionmux\0");

/**
 * Inbox `a` sends through a TCP proxy the test can silence, checking its waiting statements every
 * 300 ms; `b`, straight to the database, serves `host-b`.
 */
async function inboxesBehindProxy(): Promise<{ a: PgCallInbox; b: PgCallInbox; proxy: TcpProxy }> {
  const url = new URL(pgUrl!);
  const proxy = await startTcpProxy(Number(url.port || 5432));
  cleanups.push(() => proxy.stop());
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  const schema = `inbox_pool_silent_${randomBytes(4).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl!, schema));
  const b = await PgCallInbox.open(pgUrl!, { schema, pollMs: NO_POLL });
  cleanups.push(() => b.close());
  b.serve("host-b", async () => ({ status: "ok", result: "served" }));
  const a = await PgCallInbox.open(url.toString(), {
    schema,
    pollMs: NO_POLL,
    maxConnections: 1,
    // the LISTEN connection is not what this is about: its own check is tested elsewhere
    listenCheckMs: 600_000,
    queryCheckMs: 300,
  });
  cleanups.push(() => a.close());
  return { a, b, proxy };
}

/** What a send came to, once it did: its outcome or its error. */
function settling(
  sent: Promise<ForwardOutcome>,
): () => { outcome: ForwardOutcome } | { error: unknown } | undefined {
  let settled: { outcome: ForwardOutcome } | { error: unknown } | undefined;
  sent.then(
    (outcome) => {
      settled = { outcome };
    },
    (error: unknown) => {
      settled = { error };
    },
  );
  return () => settled;
}

/** The typed error a send failed with, and the database's error under it. */
function failure(settled: { outcome: ForwardOutcome } | { error: unknown } | undefined) {
  const error = settled && "error" in settled ? settled.error : undefined;
  return error instanceof SessionmuxError
    ? { code: error.code, cause: (error.cause as Error | undefined)?.message }
    : { untyped: error ?? settled };
}

describe.skipIf(!pgUrl)("PostgreSQL call inbox whose pooled connection goes silent", () => {
  it("fails a call whose statement's answer is lost as on a closed connection; the next call is answered", async () => {
    const { a, proxy } = await inboxesBehindProxy();
    expect(await a.send("host-b", call("s1"), 600_000)).toEqual({ status: "ok", result: "served" });

    // the pool's one connection, idle now, goes silent: the next call's INSERT is lost on the way
    expect(proxy.silenceAll(pooled)).toBe(1);
    const settled = settling(a.send("host-b", call("s2"), 600_000));
    await expect.poll(settled, { timeout: 20_000 }).toBeDefined();
    // sent, and lost before its answer: the row may have been written, and its target run it
    expect(failure(settled())).toEqual({
      code: "outcome_unknown",
      cause: expect.stringMatching(/connection terminated/i),
    });
    // its socket destroyed, not kept for TCP to give up on
    await expect.poll(() => proxy.silenced, { timeout: 20_000 }).toBe(0);

    expect(await a.send("host-b", call("s3"), 600_000)).toEqual({ status: "ok", result: "served" });
  }, 60_000);

  it("fails a call whose new connection's handshake the silent path swallows; the next call is answered once the path is back", async () => {
    const { a, proxy } = await inboxesBehindProxy();
    expect(await a.send("host-b", call("s1"), 600_000)).toEqual({ status: "ok", result: "served" });
    // the path stays dead: the connection the pool makes in place of the silent one is swallowed too
    proxy.silenceNew(pooled);
    expect(proxy.silenceAll(pooled)).toBe(1);
    const first = settling(a.send("host-b", call("s2"), 600_000));
    await expect.poll(first, { timeout: 20_000 }).toBeDefined();
    expect(failure(first())).toEqual({
      code: "outcome_unknown",
      cause: expect.stringMatching(/connection terminated/i),
    });
    const second = settling(a.send("host-b", call("s3"), 600_000));
    await expect.poll(second, { timeout: 20_000 }).toBeDefined();
    // no connection, so nothing sent: the caller may send it again
    expect(failure(second())).toEqual({
      code: "persistence_failure",
      cause: expect.stringMatching(/timeout/i),
    });
    await expect.poll(() => proxy.silenced, { timeout: 20_000 }).toBe(0);

    proxy.silenceNew();
    expect(await a.send("host-b", call("s4"), 600_000)).toEqual({ status: "ok", result: "served" });
  }, 60_000);
});
