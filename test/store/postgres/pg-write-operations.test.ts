import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { pgUrl } from "../contract/backends.js";
import { tamperSchema } from "../contract/operator-hand.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { backendPid, blockedBy, holdSessionWrites } from "./held-writes.js";
import { sentStatements } from "./pg-client-spies.js";
import { type TwoHosts, twoHostsFixture } from "./two-hosts.js";

/**
 * The PostgreSQL write operations where they part from the SQLite ones: several hosts write one
 * database, so a create or fork can lose the race for its id inside its own transaction, and a
 * host keeps session states between transactions for the writes that need no read.
 */
const openTwoHosts = twoHostsFixture("wo");

const listeners: pg.Client[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(listeners.splice(0).map((client) => client.end()));
});

/** Every NOTIFY on the schema's channel, as a third host hears it: its changes, one list per batch. */
async function hear(schema: string): Promise<[string, string, string, number, number][][]> {
  const heard: [string, string, string, number, number][][] = [];
  const listener = new pg.Client({ connectionString: pgUrl! });
  listeners.push(listener);
  listener.on("notification", (message) => {
    heard.push((JSON.parse(message.payload ?? "{}") as { c: [string, string, string, number, number][] }).c);
  });
  await listener.connect();
  await listener.query(`LISTEN "sessionmux_${schema}"`);
  return heard;
}

/** A batch went the kept way first: it sent the lock-and-check of the kept rows. */
const triedKept = (sent: readonly string[]) => sent.includes("sessionmux_lock_kept");

async function seqs(hosts: TwoHosts, sessionId: string): Promise<number[]> {
  const read = await hosts.a.readAfter(sessionId, 0, 100);
  return read.status === "ok" ? read.events.map((event) => event.seq) : [];
}

describe.skipIf(!pgUrl)("PostgreSQL write operations", () => {
  it("a create that lost the race for its id to another host's create is told exists and writes nothing", async () => {
    const hosts = await openTwoHosts();
    const { a, b, schema } = hosts;
    const held = await holdSessionWrites(schema, "INSERT");
    await held.hold();
    try {
      const onB = b.create({ sessionId: "x", owner: "bob", model: "m", title: "B's" });
      await held.waitFor("held");
      // A found no row for the id; its insert waits for B's transaction to end
      const onA = a.create({ sessionId: "x", owner: "alice", model: "m", title: "A's" });
      await held.waitFor("behind");
      await held.release();
      expect(await onB).toMatchObject({ status: "created" });
      expect(await onA).toEqual({ status: "exists" });
    } finally {
      await held.end();
    }
    expect(await seqs(hosts, "x")).toEqual([1]);
    expect(await a.projection("x")).toMatchObject({ owner: "bob", title: "B's" });
  });

  it("a fork whose target id another host took meanwhile is told exists, or retired once that one was deleted", async () => {
    const hosts = await openTwoHosts();
    const { a, b, schema } = hosts;
    await a.create({ sessionId: "src", owner: "alice", model: "m" });
    await a.append("src", [turnStart("t"), userMessage("hi"), turnEnd("t")]);
    const held = await holdSessionWrites(schema, "INSERT");
    await held.hold();
    try {
      const onB = b.create({ sessionId: "x", owner: "bob", model: "m" });
      await held.waitFor("held");
      const onA = a.fork({ sourceId: "src", targetId: "x", owner: "alice" });
      await held.waitFor("behind");
      await held.release();
      expect(await onB).toMatchObject({ status: "created" });
      expect(await onA).toEqual({ status: "exists" });
      expect(await seqs(hosts, "x")).toEqual([1]);

      // the same race, lost to a session created and deleted in one transaction on B
      await held.hold();
      const onB2 = Promise.all([b.create({ sessionId: "y", owner: "bob", model: "m" }), b.delete("y")]);
      await held.waitFor("held");
      const onA2 = a.fork({ sourceId: "src", targetId: "y", owner: "alice" });
      await held.waitFor("behind");
      await held.release();
      expect(await onB2).toEqual([expect.objectContaining({ status: "created" }), { status: "deleted" }]);
      expect(await onA2).toEqual({ status: "retired" });
      expect(await a.isRetired("y")).toBe(true);
    } finally {
      await held.end();
    }
  });

  it("an append with a prompt key or a queued item to start goes the usual way at once, with no kept try", async () => {
    const { a } = await openTwoHosts();
    await a.create({ sessionId: "s", owner: "alice", model: "m" });
    await a.enqueuePrompt({ sessionId: "s", itemId: "q1", queuedAt: 1, input: { text: "queued" } });
    await a.append("s", [turnStart("t0"), turnEnd("t0")]);
    const sent = sentStatements();
    // the plain append is kept-eligible: this is what the assertions below tell apart
    await a.append("s", [delta("t0", "late")]);
    expect(triedKept(sent)).toBe(true);
    sent.length = 0;
    const prompted = await a.append("s", [turnStart("t1"), userMessage("hi")], {
      prompt: { clientMessageId: "k1", record: { queued: false, turnId: "t1" } },
    });
    expect(prompted.status).toBe("appended");
    expect(triedKept(sent)).toBe(false);
    await a.append("s", [turnEnd("t1")]);
    sent.length = 0;
    const started = await a.append("s", [turnStart("t2")], { dequeue: { itemId: "q1", turnId: "t2" } });
    expect(started.status).toBe("appended");
    expect(triedKept(sent)).toBe(false);
  });

  it("stores free text with U+0000, which PostgreSQL text cannot hold, without it", async () => {
    const { a } = await openTwoHosts();
    expect(
      await a.create({ sessionId: "s", owner: "o", model: "m\u0000odel", title: "ti\u0000tle" }),
    ).toMatchObject({
      status: "created",
    });
    expect(await a.append("s", [turnStart("t1"), userMessage("zeb\u0000ra crossing")])).toMatchObject({
      status: "appended",
    });
    expect(await a.projection("s")).toMatchObject({ title: "title", model: "model" });
    // the event keeps the text as sent; its search text drops the character
    expect((await a.search("zebra", 10)).map((hit) => [hit.sessionId, hit.seq])).toEqual([["s", 3]]);
  });

  it("an append of no events announces nothing to other hosts", async () => {
    const { a, schema } = await openTwoHosts();
    const created = await a.create({ sessionId: "s", owner: "alice", model: "m" });
    if (created.status !== "created") throw new Error(created.status);
    const heard = await hear(schema);
    expect(await a.append("s", [])).toMatchObject({ status: "appended", events: [] });
    // a marker batch: its NOTIFY comes after any the empty append could have sent
    await a.append("s", [turnStart("t")]);
    await vi.waitFor(() => expect(heard.at(-1)).toEqual([["s", "append", created.header.epoch, 2, 2]]), {
      timeout: 5_000,
    });
    expect(heard).toHaveLength(1);
  });

  it("a restart and a rebuild skip a session another host deletes between their scan and their lock", async () => {
    const { a, b, schema } = await openTwoHosts();
    for (const id of ["g1", "g2", "kept"]) {
      await a.create({ sessionId: id, owner: "alice", model: "m" });
      await a.append(id, [turnStart("t"), userMessage("hi")]);
    }
    // B's delete waits, holding the session's row lock, until the test lets it commit
    const held = await holdSessionWrites(schema, "UPDATE OF retired_at");
    /** Runs `work` with B's delete of `id` committed between `work`'s scan and its lock. */
    async function deletedMeanwhile<T>(id: string, work: () => Promise<T>): Promise<T> {
      await held.hold();
      const deleted = b.delete(id);
      await held.waitFor("held");
      // A's scan still sees the session live (B has not committed); its lock waits for B
      const done = work();
      await held.waitFor("behind");
      await held.release();
      expect(await deleted).toEqual({ status: "deleted" });
      return done;
    }
    try {
      expect(await deletedMeanwhile("g1", () => a.interruptOpenTurns(9))).toEqual(["g2", "kept"]);
      await a.append("kept", [turnStart("t2")]);
      const before = await a.projection("kept");
      await deletedMeanwhile("g2", () => a.rebuildProjections());
      expect(await a.projection("kept")).toEqual(before);
      expect(await a.projection("g2")).toBeNull();
    } finally {
      await held.end();
    }
  });

  it("interruptOpenTurns neither locks nor waits for the row of a session whose live lease another host holds", async () => {
    const { a, b, schema } = await openTwoHosts();
    for (const id of ["busy", "orphan"]) {
      await a.create({ sessionId: id, owner: "alice", model: "m" });
      await a.append(id, [turnStart(`t-${id}`)]);
    }
    expect(await b.acquireLease("busy", "host-b", 60_000)).toMatchObject({ status: "acquired" });
    // host B's append to its session, held open with the session's row locked
    const holder = new pg.Client({ connectionString: pgUrl! });
    const watcher = new pg.Client({ connectionString: pgUrl! });
    await Promise.all([holder.connect(), watcher.connect()]);
    try {
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${schema}".projections WHERE session_id = 'busy' FOR UPDATE`);
      const pid = await backendPid(holder);
      let settled = false;
      const closing = a.interruptOpenTurns(5, { hostId: "host-a" }).finally(() => {
        settled = true;
      });
      // it ends while B's transaction is still open, never queued behind it
      await expect
        .poll(
          async () => (settled ? "done" : (await blockedBy(watcher, pid)).direct > 0 ? "waits" : "running"),
          {
            timeout: 10_000,
            interval: 20,
          },
        )
        .toBe("done");
      expect(await closing).toEqual(["orphan"]);
      // without a host id B's lease spares the session just as well
      expect(await a.interruptOpenTurns(6)).toEqual([]);
    } finally {
      await holder.query("ROLLBACK");
      await Promise.all([holder.end(), watcher.end()]);
    }
    expect((await a.projection("busy"))?.openTurnId).toBe("t-busy");
  });

  it("locks every session a write names up front, in id order, so it holds none while it waits for another", async () => {
    const { a, b, schema } = await openTwoHosts();
    const writes: [string, (id: string) => Promise<unknown>][] = [
      ["create", (id) => a.create({ sessionId: id, owner: "alice", model: "m" })],
      ["clear", (id) => a.clear(id)],
      ["ack", (id) => a.ack(id, 1)],
      ["fork", (id) => a.fork({ sourceId: id, targetId: `${id}-fork`, owner: "alice" })],
      ["delete", (id) => a.delete(id)],
    ];
    await a.create({ sessionId: "b", owner: "alice", model: "m" });
    for (const [name] of writes) await a.create({ sessionId: `a-${name}`, owner: "alice", model: "m" });
    const holder = new pg.Client({ connectionString: pgUrl! });
    const admin = new pg.Client({ connectionString: pgUrl! });
    listeners.push(holder, admin);
    await Promise.all([holder.connect(), admin.connect()]);
    const holderPid = await backendPid(holder);
    // A waits for the holder; B, if it waits, waits behind A
    const waiters = async () => {
      const { direct, behind } = await blockedBy(admin, holderPid);
      return direct + behind;
    };
    for (const [name, write] of writes) {
      const id = `a-${name}`;
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${schema}".projections WHERE session_id = $1 FOR UPDATE`, [id]);
      try {
        // one batch on A: an append to "b", then the write on the held session ("a-…" < "b")
        const onA = Promise.all([a.append("b", [turnStart(name)]), write(id)]);
        await expect.poll(waiters, { timeout: 10_000, interval: 20 }).toBe(1);
        // A waits for the held session before it locks "b": B's append to "b" goes through
        let watching = true;
        const watch = (async () => {
          while (watching) if ((await waiters()) >= 2) return "B waits for A";
          return "B appended";
        })();
        const first = await Promise.race([b.append("b", [turnEnd(name)]).then(() => "B appended"), watch]);
        watching = false;
        await watch;
        expect(first).toBe("B appended");
        await holder.query("ROLLBACK");
        await onA;
      } finally {
        await holder.query("ROLLBACK");
      }
    }
  });

  it("rebuilding projections repairs rows that no longer match the log", async () => {
    const hosts = await openTwoHosts();
    const { a, schema } = hosts;
    await a.create({ sessionId: "a", owner: "o", model: "m", title: "A" });
    await a.append("a", [turnStart("t1"), userMessage("hello there"), turnEnd("t1")]);
    await a.create({ sessionId: "b", owner: "p", model: "m" });
    await a.append("b", [turnStart("t1"), userMessage("second")]);
    const before = { a: await a.projection("a"), b: await a.projection("b") };
    await tamperSchema(
      schema,
      "UPDATE projections SET title = 'damaged', turn_count = 42, message_count = 0, last_state = 'idle'",
    );
    expect((await a.projection("a"))?.title).toBe("damaged");
    await a.rebuildProjections();
    expect({ a: await a.projection("a"), b: await a.projection("b") }).toEqual(before);
  });
});
