import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import { PgReads } from "../../../src/store/postgres/pg-reads.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { listenClientsMade } from "./listen-connects.js";
import { refusableRole } from "./refusable-role.js";

/**
 * A host's LISTEN connection is how it hears of other hosts' commits. When it drops, and the
 * database refuses the host for a while (a restart, a failover, a full connection table), the
 * commits made meanwhile are heard of by nobody: once the host is back in, it must read what its
 * subscribers follow, or they miss those events until the session's next commit, which may never
 * come.
 */
const describePg = pgUrl ? describe : describe.skip;

afterEach(() => {
  vi.restoreAllMocks();
});

/** Two stores on one schema: `a` as the database's own user, `b` as a role the test can lock out. */
async function twoHosts() {
  const refusable = await refusableRole("smx_feed");
  const { schema } = refusable;
  const opened: PostgresSessionStore[] = [];
  const close = async () => {
    for (const store of opened) await store.close();
    await refusable.drop();
  };
  const b = async () => {
    const store = await PostgresSessionStore.open(refusable.url, { schema, maxConnections: 2 });
    opened.push(store);
    return store;
  };
  let first: PostgresSessionStore;
  let a: PostgresSessionStore;
  try {
    // the schema's tables are the role's: `a` (a superuser) opens it once `b` created them
    first = await b();
    a = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
    opened.push(a);
  } catch (error) {
    await close();
    throw error;
  }
  return {
    a,
    b: first,
    openB: b,
    /** `b`'s role, the user of its connections. */
    role: refusable.role,
    /** `b`'s role may not log in, and every connection it has ends (the LISTEN one included). */
    lockOut: refusable.lockOut,
    letIn: refusable.letIn,
    listening: refusable.listening,
    runningEnded: refusable.runningEnded,
    close,
  };
}

/** The seqs of the events a subscriber of `sessionId` was given. */
function seqsHeard(store: PostgresSessionStore, sessionId: string): number[] {
  const seqs: number[] = [];
  store.subscribe(sessionId, (notice: CommitNotice) => {
    if (notice.kind === "append" || notice.kind === "create") for (const e of notice.events) seqs.push(e.seq);
  });
  return seqs;
}

/**
 * The first reconnect is scheduled within 100 ms of the drop; holding the role out for longer
 * than that makes it fail, so the host gets back in by a later attempt.
 */
const PAST_FIRST_RECONNECT_MS = 400;

describePg("PostgreSQL commit feed after its LISTEN connection dropped", () => {
  it("delivers what another host committed while this one was refused, after a later attempt got it back in", async () => {
    const hosts = await twoHosts();
    try {
      await hosts.a.create({ sessionId: "s", owner: "o", model: "m" });
      const heard = seqsHeard(hosts.b, "s");
      await hosts.a.append("s", [delta("t", "heard live")]);
      // `b` may hear of the session's creation too (seq 1), depending on when its NOTIFY comes
      const from2 = () => heard.filter((seq) => seq >= 2);
      await expect.poll(from2).toEqual([2]);

      await hosts.lockOut();
      await hosts.a.append("s", [delta("t", "committed while b was out")]);
      await sleep(PAST_FIRST_RECONNECT_MS);
      await hosts.letIn();
      await expect.poll(() => hosts.listening(), { timeout: 10_000 }).toBe(true);
      await expect.poll(from2, { timeout: 5_000 }).toEqual([2, 3]);
    } finally {
      await hosts.close();
    }
  });

  it("comes back after its LISTEN connection ended quietly, with no error first, and delivers what it missed", async () => {
    const made = listenClientsMade();
    const hosts = await twoHosts();
    try {
      await hosts.a.create({ sessionId: "s", owner: "o", model: "m" });
      const heard = seqsHeard(hosts.b, "s");
      const listen = made.find((client) => client.user === hosts.role);
      // as a connection closed on purpose elsewhere would end: `end` alone
      await listen!.end();
      await hosts.a.append("s", [delta("t", "committed while b was out")]);
      await expect.poll(() => hosts.listening(), { timeout: 10_000 }).toBe(true);
      await expect.poll(() => heard.filter((seq) => seq >= 2), { timeout: 5_000 }).toEqual([2]);
    } finally {
      await hosts.close();
    }
  });

  it("wakes the subscribers of a session it had delivered nothing of yet", async () => {
    const hosts = await twoHosts();
    try {
      // committed before `b` subscribed: a follower on `b` reads these from the log itself
      await hosts.a.create({ sessionId: "s", owner: "o", model: "m" });
      await hosts.a.append("s", [delta("t", "read from the log")]);
      const b = await hosts.openB();
      const heard = seqsHeard(b, "s");

      await hosts.lockOut();
      await hosts.a.append("s", [delta("t", "committed while b was out")]);
      await hosts.letIn();
      await expect.poll(() => hosts.listening(), { timeout: 10_000 }).toBe(true);
      // the newest event at least: a follower that has 2 takes 3; one further behind reads the gap
      await expect.poll(() => heard.at(-1), { timeout: 5_000 }).toBe(3);
      expect(new Set(heard).size).toBe(heard.length);
    } finally {
      await hosts.close();
    }
  });

  it("tells of a clear, a delete and a queued prompt made while it was out: the clear before the new epoch's events", async () => {
    const hosts = await twoHosts();
    try {
      const { a, b } = hosts;
      for (const sessionId of ["cleared", "deleted", "deleted-unheard"])
        await a.create({ sessionId, owner: "o", model: "m" });
      const kinds = new Map<string, string[]>();
      const record = (sessionId: string) => {
        kinds.set(sessionId, []);
        b.subscribe(sessionId, (notice) => {
          const seqs =
            notice.kind === "append" || notice.kind === "create" ? notice.events.map((e) => e.seq) : [];
          kinds.get(sessionId)!.push(seqs.length > 0 ? `${notice.kind} ${seqs.join(",")}` : notice.kind);
        });
      };
      // `b` delivers something of these two before it is shut out, nothing of the third
      record("cleared");
      record("deleted");
      await a.append("cleared", [delta("t", "before")]);
      await a.append("deleted", [delta("t", "before")]);
      await vi.waitFor(() => expect(kinds.get("deleted")?.at(-1)).toBe("append 2"), { timeout: 20_000 });
      await vi.waitFor(() => expect(kinds.get("cleared")?.at(-1)).toBe("append 2"), { timeout: 20_000 });
      record("deleted-unheard");
      await a.create({ sessionId: "queued", owner: "o", model: "m" });
      const live: LiveStateNotice[] = [];
      b.subscribeLive((notice) => live.push(notice));

      await hosts.lockOut();
      await a.enqueuePrompt({ sessionId: "queued", itemId: "q1", queuedAt: 1, input: { text: "while out" } });
      await a.clear("cleared");
      await a.append("cleared", [delta("t", "after")]);
      await a.delete("deleted");
      await a.delete("deleted-unheard");
      await hosts.letIn();
      await expect.poll(() => hosts.listening(), { timeout: 10_000 }).toBe(true);
      await vi.waitFor(() => expect(kinds.get("cleared")?.at(-1)).toBe("append 1"), { timeout: 20_000 });
      await vi.waitFor(() => expect(kinds.get("deleted")?.at(-1)).toBe("delete"), { timeout: 20_000 });
      await vi.waitFor(() => expect(kinds.get("deleted-unheard")?.at(-1)).toBe("delete"), {
        timeout: 20_000,
      });
      // `b` may have heard of each creation too (seq 1), depending on when those NOTIFYs came
      expect(kinds.get("cleared")?.filter((k) => k !== "create 1")).toEqual([
        "append 2",
        "clear",
        "append 1",
      ]);
      expect(kinds.get("deleted")?.filter((k) => k !== "create 1")).toEqual(["append 2", "delete"]);
      expect(kinds.get("deleted-unheard")).toEqual(["delete"]);
      // the live state is read again too: the prompt queued meanwhile
      await vi.waitFor(
        () => expect(live).toContainEqual(expect.objectContaining({ kind: "queue", sessionId: "queued" })),
        { timeout: 20_000 },
      );
    } finally {
      await hosts.close();
    }
  });

  it("tells its live listeners of a question asked and answered on another host while it was out", async () => {
    const hosts = await twoHosts();
    try {
      const { a, b } = hosts;
      await a.create({ sessionId: "s", owner: "o", model: "m" });
      const live: LiveStateNotice[] = [];
      b.subscribeLive((notice) => live.push(notice));
      await hosts.lockOut();
      const ask = { turnId: "t1", interactionId: "i1", kind: "approval" as const, action: "deploy" };
      await a.append("s", [turnStart("t1"), { type: "interaction/requested", data: ask }]);
      await a.resolveInteraction("i1", { outcome: "approve" });
      await hosts.letIn();
      await expect.poll(() => hosts.listening(), { timeout: 10_000 }).toBe(true);
      // no longer pending: only the answers given since the previous LISTEN find it
      await vi.waitFor(
        () =>
          expect(live.filter((n) => n.kind.startsWith("interaction"))).toEqual([
            expect.objectContaining({ kind: "interaction.requested", owner: "o" }),
            expect.objectContaining({ kind: "interaction.resolved", interactionId: "i1", sessionId: "s" }),
          ]),
        { timeout: 20_000 },
      );
    } finally {
      await hosts.close();
    }
  });

  it("reads the heads of everything it follows a page at a time, and the log of only what moved", async () => {
    const hosts = await twoHosts();
    try {
      const { a } = hosts;
      // one more than a page of heads: the last session is in a second statement
      const ids = Array.from({ length: 1_001 }, (_, i) => `s${i}`);
      await Promise.all(ids.map((sessionId) => a.create({ sessionId, owner: "o", model: "m" })));
      // opened after the sessions were created (and every transaction then running had ended):
      // it hears of none of those creations, and they are older than its LISTEN
      await hosts.runningEnded();
      const b = await hosts.openB();
      const kinds = new Map<string, string[]>();
      for (const sessionId of ids) {
        kinds.set(sessionId, []);
        b.subscribe(sessionId, (notice) => {
          const seqs =
            notice.kind === "append" || notice.kind === "create" ? notice.events.map((e) => e.seq) : [];
          kinds.get(sessionId)!.push(seqs.length > 0 ? `${notice.kind} ${seqs.join(",")}` : notice.kind);
        });
      }
      const last = (sessionId: string) => kinds.get(sessionId)?.at(-1);
      // s5 is delivered too, and does not move while `b` is out
      const delivered = ["s3", "s5", "s7", "s11"];
      for (const sessionId of delivered) await a.append(sessionId, [delta("t", "before")]);
      for (const sessionId of delivered)
        await vi.waitFor(() => expect(last(sessionId)).toBe("append 2"), { timeout: 20_000 });

      await hosts.lockOut();
      await a.append("s3", [delta("t", "while out")]);
      await a.clear("s7");
      await a.append("s7", [delta("t", "new epoch")]);
      await a.delete("s11");
      await a.append("s1000", [delta("t", "while out, never delivered")]);
      const heads = vi.spyOn(PgReads.prototype, "heads");
      const reads = vi.spyOn(PgReads.prototype, "readAfter");
      await hosts.letIn();
      await expect.poll(() => hosts.listening(), { timeout: 10_000 }).toBe(true);
      await vi.waitFor(() => expect(last("s3")).toBe("append 3"), { timeout: 20_000 });
      await vi.waitFor(() => expect(last("s7")).toBe("append 1"), { timeout: 20_000 });
      await vi.waitFor(() => expect(last("s11")).toBe("delete"), { timeout: 20_000 });
      await vi.waitFor(() => expect(last("s1000")).toBe("append 2"), { timeout: 20_000 });

      expect(heads.mock.calls.map(([page]) => page.length)).toEqual([1_000, 1]);
      expect(heads.mock.calls.flatMap(([page]) => page).sort()).toEqual([...ids].sort());
      // the clear is found by the first read of s7, whose new epoch is then read from its start
      expect(reads.mock.calls.map(([sessionId]) => sessionId).sort()).toEqual(["s1000", "s3", "s7", "s7"]);
      expect(kinds.get("s7")).toEqual(["append 2", "clear", "append 1"]);
      expect(kinds.get("s3")).toEqual(["append 2", "append 3"]);
      expect(kinds.get("s11")).toEqual(["append 2", "delete"]);
      expect(kinds.get("s1000")).toEqual(["append 2"]);
      expect(kinds.get("s5")).toEqual(["append 2"]);
      for (const sessionId of ids.filter((id) => ![...delivered, "s1000"].includes(id)))
        expect(kinds.get(sessionId)).toEqual([]);
    } finally {
      vi.restoreAllMocks();
      await hosts.close();
    }
  });

  it("tells its store-wide listeners of the sessions another host created or renamed while it was out, the created ones as such", async () => {
    const hosts = await twoHosts();
    try {
      const { a } = hosts;
      // created before `b` opened: not to be told again after the outage
      await a.create({ sessionId: "old", owner: "o", model: "m" });
      // created before `b` opened too, and cleared while it is out: changed, not created
      await a.create({ sessionId: "cleared", owner: "o", model: "m" });
      await hosts.runningEnded();
      const b = await hosts.openB();
      const told: [string, string, string | undefined][] = [];
      const created: string[] = [];
      b.subscribeAll((sessionId, notice, projection) => {
        told.push([sessionId, notice.kind, projection?.title]);
        if (notice.kind === "meta" && notice.created) created.push(sessionId);
      });
      await a.create({ sessionId: "heard", owner: "o", model: "m" });
      await vi.waitFor(() => expect(told.map(([id]) => id)).toContain("heard"), { timeout: 20_000 });
      told.length = 0;

      await hosts.lockOut();
      await a.create({ sessionId: "born-while-out", owner: "o", model: "m" });
      await a.append("born-while-out", [{ type: "session/renamed", data: { title: "named while out" } }]);
      await a.clear("cleared");
      await a.append("cleared", [userMessage("a new log")]);
      // a thousand more: the rows come a page of 1,000 at a time
      const more = Array.from({ length: 1_000 }, (_, i) => `w${i}`);
      await Promise.all(more.map((sessionId) => a.create({ sessionId, owner: "o", model: "m" })));
      // held out past the first attempt: a refused attempt must leave what it missed to be read
      await sleep(PAST_FIRST_RECONNECT_MS);
      await hosts.letIn();
      await expect.poll(() => hosts.listening(), { timeout: 10_000 }).toBe(true);
      await vi.waitFor(() => expect(told.length).toBeGreaterThanOrEqual(1_002), { timeout: 20_000 });
      expect(told).toContainEqual(["born-while-out", "meta", "named while out"]);
      // each once, and nothing of the sessions it had heard of or that nobody wrote meanwhile
      expect(told.map(([id]) => id).sort()).toEqual(["born-while-out", "cleared", ...more].sort());
      expect(new Set(told.map(([, kind]) => kind))).toEqual(new Set(["meta"]));
      expect(created.sort()).toEqual(["born-while-out", ...more].sort());
    } finally {
      await hosts.close();
    }
  });

  it("tells its store-wide listeners of an acknowledgement another host made while it was out, and not again of rows they were given", async () => {
    const hosts = await twoHosts();
    try {
      const { a, b } = hosts;
      const told: [string, string, boolean | undefined][] = [];
      b.subscribeAll((sessionId, notice, projection) =>
        told.push([sessionId, notice.kind, projection?.hasUnseenCompletion]),
      );
      // `b` delivers all three before the outage: one another host wrote, one it wrote itself, and
      // one with a completion nobody has seen yet
      await a.create({ sessionId: "heard", owner: "o", model: "m" });
      await b.create({ sessionId: "own", owner: "o", model: "m" });
      await b.append("own", [delta("t", "written here")]);
      await a.create({ sessionId: "acked", owner: "o", model: "m" });
      await a.append("acked", [turnStart("t1"), userMessage("hi"), turnEnd("t1")]);
      await vi.waitFor(() => expect(told).toContainEqual(["acked", "append", true]), { timeout: 20_000 });
      await vi.waitFor(() => expect(told.map(([id]) => id)).toContain("heard"), { timeout: 20_000 });
      const settledAt = (await a.projection("acked"))?.completionSettledAt;
      if (settledAt === null || settledAt === undefined) throw new Error("no settled completion");
      told.length = 0;

      await hosts.lockOut();
      // moves no head: only the projection row says it happened
      await a.ack("acked", settledAt);
      await hosts.letIn();
      await expect.poll(() => hosts.listening(), { timeout: 10_000 }).toBe(true);
      await vi.waitFor(() => expect(told).toContainEqual(["acked", "meta", false]), { timeout: 20_000 });
      // the rows written since come in one page, told in one pass: with the ack, all the rest
      expect(told).toEqual([["acked", "meta", false]]);
    } finally {
      await hosts.close();
    }
  });

  it("tells its store-wide listeners of the sessions another host deleted while it was out, though it never delivered anything of them", async () => {
    const hosts = await twoHosts();
    try {
      const { a } = hosts;
      // made before `b` opened, so `b` delivers nothing of them; both are deleted while it is out
      const unheard = Array.from({ length: 1_001 }, (_, i) => `u${i}`);
      await Promise.all(unheard.map((sessionId) => a.create({ sessionId, owner: "o", model: "m" })));
      await a.create({ sessionId: "kept", owner: "o", model: "m" });
      await a.create({ sessionId: "deleted-before", owner: "o", model: "m" });
      await a.delete("deleted-before");
      await hosts.runningEnded();
      const b = await hosts.openB();
      const told: [string, string][] = [];
      b.subscribeAll((sessionId, notice) => told.push([sessionId, notice.kind]));
      await a.create({ sessionId: "heard", owner: "o", model: "m" });
      await a.delete("heard");
      await vi.waitFor(() => expect(told).toContainEqual(["heard", "delete"]), { timeout: 20_000 });
      told.length = 0;

      await hosts.lockOut();
      await Promise.all(unheard.map((sessionId) => a.delete(sessionId)));
      await hosts.letIn();
      await expect.poll(() => hosts.listening(), { timeout: 10_000 }).toBe(true);
      // a page of 1,000 and one more
      await vi.waitFor(() => expect(told.length).toBeGreaterThanOrEqual(1_001), { timeout: 20_000 });
      await sleep(200);
      // each once; not the one deleted before `b` opened, nor the one it had told of already
      expect(told.map(([id]) => id).sort()).toEqual([...unheard].sort());
      expect(new Set(told.map(([, kind]) => kind))).toEqual(new Set(["delete"]));
    } finally {
      await hosts.close();
    }
  });
});
