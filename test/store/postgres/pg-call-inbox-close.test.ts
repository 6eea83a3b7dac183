import { describe, expect, it, vi } from "vitest";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { settlement } from "../../support/settlement.js";
import { pgUrl } from "../contract/backends.js";
import { call, heldHandler, holdNextQuery, inboxFixture, NO_POLL } from "./call-inbox-rows.js";
import { holdWrites, lockTable } from "./held-writes.js";

/** Longer than any test: a sender told nothing at its close waits out the test, not its own timeout. */
const LONG = 600_000;
const UNKNOWN = { status: "unknown" };
/** A close's bound on its take-back past any held statement: the outcome is the statement's, however slow the machine. */
const SETTLED = 60_000;

/**
 * A host whose call inbox closes (its shutdown) while calls it sent wait on their replies: each
 * caller is told what became of its call. One its target never claimed is taken back, so it never
 * runs, and may be sent again (`timeout`); one the target claimed may run, or already runs, there:
 * `unknown`, never a cue to send it again.
 */
describe.skipIf(!pgUrl)("PostgreSQL call inbox: a sender's close", () => {
  const inbox = inboxFixture("inbox_close");
  const cleanups = cleanupsAfterEach(() => vi.restoreAllMocks());

  it("takes back a call its target has not claimed: the row is gone and its caller told timeout, at once", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(a);
    const sent = a.send("host-b", call("s1"), LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    await a.close();
    // far before its own timeout: the test's timeout would end the wait first
    expect(await sent).toEqual({ status: "timeout" });
    // nobody serving host-b later finds it
    expect(await inbox.rowCount()).toBe(0);
  });

  it("answers unknown, at once, a call its target claimed and still runs: it may take effect there", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(a);
    const { started, release, ran, handler } = heldHandler("done");
    b.serve("host-b", handler);
    const sent = a.send("host-b", call("s1", { n: 1 }), LONG);
    await started.promise;
    await a.close();
    expect(await sent).toEqual(UNKNOWN);
    // it does take effect: told to send it again, its caller would have it run twice
    release.open();
    await expect
      .poll(async () => (await inbox.sql("SELECT 1 FROM forwarded_calls WHERE reply IS NOT NULL")).length, {
        timeout: 20_000,
      })
      .toBe(1);
    expect(ran).toEqual([{ n: 1 }]);
  });

  it("takes back a call whose target's claim holds it as the sender closes: the take-back waits for the claim, finds it claimed and not begun, and the call never runs", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, closeTakeBackMs: SETTLED });
    const b = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(a);
    // b's claim stops inside its transaction, the row updated and locked
    const claims = await holdWrites(inbox.schema, "forwarded_calls", "UPDATE OF claimed_at");
    cleanups.push(() => claims.end());
    await claims.hold();
    const sent = a.send("host-b", call("s1", { n: 1 }), LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    const { ran, release, handler } = heldHandler("done");
    release.open();
    b.serve("host-b", handler);
    await claims.waitFor("held");
    const closing = a.close();
    // the close's take-back waits for the row the claim holds (a caller told at once was told
    // without a look)
    await Promise.race([claims.waitFor("behind"), sent]).catch(() => undefined);
    await claims.release();
    await closing;
    // the claim went through, and the take-back after it: the call can no longer begin there
    expect(await sent).toEqual({ status: "timeout" });
    expect(await inbox.rowCount()).toBe(0);
    // a next call of the session is served: the taken one did not run before it
    const next = await inbox.open({ pollMs: NO_POLL });
    expect(await next.send("host-b", call("s1", { n: 2 }), LONG)).toEqual({ status: "ok", result: "done" });
    expect(ran).toEqual([{ n: 2 }]);
  });

  it("takes back a call its target claimed and has not begun, behind an earlier call of its session: timeout, and it never runs there", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, closeTakeBackMs: SETTLED });
    const b = await inbox.open({ pollMs: NO_POLL });
    const other = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(a);
    const { started, release, ran, handler } = heldHandler("done");
    b.serve("host-b", handler);
    // the session's first call, from another host, runs and holds the session's turn
    const first = other.send("host-b", call("s1", { n: 1 }), LONG);
    await started.promise;
    const waiting = call("s1", { n: 2 });
    const sent = a.send("host-b", waiting, LONG);
    const state = async () =>
      (
        await inbox.sql<{ claimed: boolean; started: boolean | null }>(
          "SELECT claimed_at IS NOT NULL AS claimed, started FROM forwarded_calls WHERE call_id = $1",
          [waiting.callId],
        )
      )[0];
    await expect.poll(state, { timeout: 20_000 }).toEqual({ claimed: true, started: false });
    await a.close();
    // before: unknown, its row left, and it ran once the first call ended, its sender gone
    expect(await sent).toEqual({ status: "timeout" });
    expect(await state()).toBeUndefined();
    release.open();
    expect(await first).toEqual({ status: "ok", result: "done" });
    // a third call of the session runs after the second's turn came and went
    expect(await other.send("host-b", call("s1", { n: 3 }), LONG)).toEqual({ status: "ok", result: "done" });
    expect(ran).toEqual([{ n: 1 }, { n: 3 }]);
  });

  it("never tells retryable a call whose target's start holds it as the sender closes: the take-back waits for the start, finds it begun, and the call runs once", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, closeTakeBackMs: SETTLED });
    const b = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(a);
    // b's start stops inside its transaction, the row updated and locked
    const starts = await holdWrites(inbox.schema, "forwarded_calls", "UPDATE OF started");
    cleanups.push(() => starts.end());
    // b's claim committed, its answer held before b sees it: the hold then catches the start only
    const claim = holdNextQuery("SET claimed_at = clock_timestamp()", "answer", {
      when: (answer) => answer.rows.some((row: { call_id: string | null }) => row.call_id !== null),
    });
    const { ran, release, handler } = heldHandler("done");
    release.open();
    b.serve("host-b", handler);
    const sent = a.send("host-b", call("s1", { n: 1 }), LONG);
    await claim.held;
    await starts.hold();
    claim.release();
    await starts.waitFor("held");
    const closing = a.close();
    await Promise.race([starts.waitFor("behind"), sent]).catch(() => undefined);
    await starts.release();
    await closing;
    // the start went through: the call runs, so its caller must not be told to send it again
    await expect.poll(() => ran, { timeout: 20_000 }).toEqual([{ n: 1 }]);
    expect(await sent).toEqual(UNKNOWN);
  });

  it("answers with its reply a call its target answered before the close, its reply's notice not yet heard, and leaves no row", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(a);
    const forwarded = call("s1");
    const sent = a.send("host-b", forwarded, LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    // claimed, run and answered by its target, with no notification: the sender has not looked yet
    await inbox.sql("UPDATE forwarded_calls SET claimed_at = clock_timestamp() WHERE call_id = $1", [
      forwarded.callId,
    ]);
    expect(await inbox.answer(forwarded.callId, { status: "ok", result: "done" })).toBe(true);
    await a.close();
    // it ran: told unknown, its caller would not know what the owner knows
    expect(await sent).toEqual({ status: "ok", result: "done" });
    expect(await inbox.rowCount()).toBe(0);
  });

  it("reads at its close the replies that fit in maxReplyBytes, smallest first, and answers unknown the one past them", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, maxReplyBytes: 4_000 });
    inbox.forget(a);
    const calls = [call("s1"), call("s2"), call("s3")];
    const sent = calls.map((c) => a.send("host-b", c, LONG));
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(3);
    await inbox.sql("UPDATE forwarded_calls SET claimed_at = clock_timestamp()");
    const results = ["x".repeat(3_000), "y".repeat(100), "z".repeat(5_000)];
    for (const [i, c] of calls.entries()) {
      expect(await inbox.answer(c.callId, { status: "ok", result: results[i] })).toBe(true);
    }
    await a.close();
    expect(await Promise.all(sent)).toEqual([
      { status: "ok", result: results[0] },
      { status: "ok", result: results[1] },
      UNKNOWN,
    ]);
    // the one not read is left for its expiry
    expect(await inbox.callIds()).toEqual([calls[2]!.callId]);
  });

  it("answers unknown every call it cannot take back within closeTakeBackMs, and ends once its statement does", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, closeTakeBackMs: 200 });
    inbox.forget(a);
    const sent = settlement(a.send("host-b", call("s1"), LONG));
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    // the take-back waits on the lock: whether it will delete the row is not known in time
    const { admin } = await lockTable(cleanups, inbox.schema, "forwarded_calls");
    const closed = settlement(a.close());
    await expect.poll(sent, { timeout: 5_000 }).toEqual({ value: UNKNOWN });
    expect(closed()).toBeUndefined();
    await admin.query("ROLLBACK");
    await expect.poll(closed, { timeout: 20_000 }).toEqual({ value: undefined });
  });

  it("answers unknown a claimed call whose sender was between two of its statements, its row left to its target", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(a);
    const forwarded = call("s1");
    const withdraw = new AbortController();
    const sent = a.send("host-b", forwarded, LONG, withdraw.signal);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    // claimed and begun by its target: taking it back finds nothing, so the sender looks for its
    // reply next
    await inbox.sql(
      "UPDATE forwarded_calls SET claimed_at = clock_timestamp(), started = true WHERE call_id = $1",
      [forwarded.callId],
    );
    const taking = holdNextQuery("(claimed_at IS NULL OR started IS FALSE)", "answer");
    withdraw.abort();
    await taking.held;
    await a.close();
    taking.release();
    expect(await sent).toEqual(UNKNOWN);
    expect(await inbox.rowCount()).toBe(1);
  });
});
