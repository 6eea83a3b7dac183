import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import type { ForwardedCall, ForwardReply } from "../../src/store/call-inbox.js";
import { PgCallInbox } from "../../src/store/postgres/pg-call-inbox.js";
import { dropSchema } from "../store/contract/backends.js";
import { call } from "../store/postgres/call-inbox-rows.js";

const pgUrl = inject("pgUrl");

async function rowCount(url: string, schema: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const found = await client.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".forwarded_calls`);
    return Number(found.rows[0]?.n);
  } finally {
    await client.end();
  }
}

// the PostgreSQL global setup says when no database was reachable (and fails under CI=true)
describe.skipIf(!pgUrl)("PostgreSQL call inbox", () => {
  const url = pgUrl ?? "";
  let schema = "";
  const opened: PgCallInbox[] = [];
  const open = async (options: { maxPending?: number; pollMs?: number } = {}) => {
    const inbox = await PgCallInbox.open(url, { schema, ...options });
    opened.push(inbox);
    return inbox;
  };

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((i) => i.close()));
    if (schema) await dropSchema(url, schema);
    schema = "";
  });

  const fresh = () => {
    schema = `mh_inbox_${randomBytes(5).toString("hex")}`;
  };

  it("delivers a call to its target and its reply (typed errors and bytes intact) to the sender", async () => {
    fresh();
    const a = await open();
    const b = await open();
    const seen: ForwardedCall[] = [];
    b.serve("host-b", async (c) => {
      seen.push(c);
      if (c.method === "session.respond")
        return { status: "error", code: "interaction_already_resolved", message: "lost", data: { n: 1 } };
      return { status: "ok", result: { echoed: c.params } };
    });
    const bytes = new Uint8Array([1, 2, 3, 250]);
    const ok = await a.send("host-b", call("s1", { sessionId: "s1", bytes }, "session.prompt"), 15_000);
    expect(ok).toEqual({ status: "ok", result: { echoed: { sessionId: "s1", bytes } } });
    const refused = await a.send("host-b", call("s1", { sessionId: "s1" }, "session.respond"), 15_000);
    expect(refused).toEqual({
      status: "error",
      code: "interaction_already_resolved",
      message: "lost",
      data: { n: 1 },
    });
    expect(seen.map((c) => c.principal)).toEqual([
      { name: "alice", admin: false },
      { name: "alice", admin: false },
    ]);
    // answered rows are gone
    expect(await rowCount(url, schema)).toBe(0);
  });

  it("serves calls recorded while the target was not listening, oldest first per session", async () => {
    fresh();
    const a = await open({ pollMs: 100 });
    const sent: Promise<unknown>[] = [];
    for (const n of [1, 2, 3]) {
      sent.push(a.send("host-b", call("s1", { n }), 30_000));
      await expect.poll(() => rowCount(url, schema)).toBe(n);
    }
    const b = await open({ pollMs: 100 });
    const order: unknown[] = [];
    b.serve("host-b", async (c) => {
      order.push(c.params);
      return { status: "ok", result: c.params };
    });
    const replies = await Promise.all(sent);
    expect(replies).toEqual([1, 2, 3].map((n) => ({ status: "ok", result: { n } })));
    expect(order).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });

  it("a call nobody serves times out, and its row is gone so nobody can answer it later", async () => {
    fresh();
    const a = await open();
    expect(await a.send("host-gone", call("s1"), 300)).toEqual({ status: "timeout" });
    expect(await rowCount(url, schema)).toBe(0);
    // a host that comes up afterwards never runs the abandoned call
    const b = await open({ pollMs: 50 });
    let ran = 0;
    b.serve("host-gone", async () => {
      ran++;
      return { status: "ok", result: null };
    });
    const probe = await a.send("host-gone", call("s2"), 15_000);
    expect(probe.status).toBe("ok");
    expect(ran).toBe(1);
  });

  it("past its bound of pending forwarded calls a host is refused `overloaded`, and recovers", async () => {
    fresh();
    const a = await open({ maxPending: 2 });
    const b = await open();
    const release: (() => void)[] = [];
    b.serve(
      "host-b",
      () => new Promise<ForwardReply>((resolve) => release.push(() => resolve({ status: "ok", result: 1 }))),
    );
    const first = a.send("host-b", call("s1"), 30_000);
    const second = a.send("host-b", call("s2"), 30_000);
    await expect(a.send("host-b", call("s3"), 30_000)).rejects.toMatchObject({ code: "overloaded" });
    await expect.poll(() => release.length).toBe(2);
    for (const r of release) r();
    expect((await first).status).toBe("ok");
    expect((await second).status).toBe("ok");
    b.serve("host-b", async () => ({ status: "ok", result: 2 }));
    expect(await a.send("host-b", call("s3"), 30_000)).toEqual({ status: "ok", result: 2 });
  });

  it("a reply whose notification was lost (listener dropped) still reaches the sender by the poll", async () => {
    fresh();
    const a = await open({ pollMs: 100 });
    const b = await open({ pollMs: 100 });
    b.serve("host-b", async () => ({ status: "ok", result: "late" }));
    // kill every LISTEN connection of this database's inboxes: both must recover on their own
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sessionmux-calls' AND query LIKE $1",
        [`LISTEN "sessionmux_calls_${schema}"%`],
      );
    } finally {
      await admin.end();
    }
    expect(await a.send("host-b", call("s1"), 30_000)).toEqual({ status: "ok", result: "late" });
  });
});
