import { describe, expect, inject, it } from "vitest";
import type { RunningHost } from "../../src/server.js";
import { decodePayload } from "../../src/store/postgres/pg-notice-payload.js";
import { peersCleanedBy } from "../support/cleaned-peer.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { ALICE_TOKEN, TEST_TOKENS } from "../support/host.js";
import type { MuxPeer } from "../support/mux-peer.js";
import { schemaHosts } from "../support/schema-hosts.js";
import { until } from "../support/until.js";

/**
 * One committed batch can change more sessions than a NOTIFY can list (PostgreSQL refuses
 * payloads of 8000 bytes): it is then announced as "re-read", and every other host reads back
 * what it wrote, though its LISTEN connection never dropped. Its sockets get `session.added`,
 * `session.updated` and `session.removed` as a listing NOTIFY would have told them, and the rows
 * on their control streams, its followers the new events, and its HTTP session index drops what
 * it kept.
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const peer = peersCleanedBy(cleanups);
const MANY = 300;
const ALICE = { name: "alice", admin: false };
/** 128 characters, the longest a session id may be: 300 of them are far past what a NOTIFY lists. */
const longId = (i: number) => `batch-${String(i).padStart(4, "0")}-${"x".repeat(117)}`;

async function listed(host: RunningHost): Promise<string[]> {
  const res = await fetch(`${host.url}/api/chat/sessions?limit=200`, {
    headers: { authorization: `Bearer ${ALICE_TOKEN}` },
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { sessions: { session_id: string; title: string }[] };
  return body.sessions.map((row) => `${row.session_id} ${row.title}`);
}

/** The ids of the list notifications named `name` that `alice` got. */
function told(alice: MuxPeer, name: string): string[] {
  return alice
    .notifications()
    .filter((f) => f.name === name)
    .map((f) => {
      const value = f.value as { row?: { sessionId: string }; sessionId?: string };
      return value.row?.sessionId ?? value.sessionId ?? "";
    });
}

/** The NOTIFYs `host`'s commit feed hears, as they are handed on. */
function tapNotices(host: RunningHost): string[] {
  const feed = (host.store as unknown as { feed: { heard(text: string): void } }).feed;
  const hear = feed.heard.bind(feed);
  const heard: string[] = [];
  feed.heard = (text) => {
    heard.push(text);
    hear(text);
  };
  return heard;
}

describe.skipIf(!pgUrl)("a batch too large for its NOTIFY, seen from another host", () => {
  it("reaches the sockets, control streams, followers and HTTP index of a host that never lost its LISTEN connection", async () => {
    const hosts = schemaHosts(pgUrl, "large_batch", TEST_TOKENS, cleanups);
    const a = await hosts.start("host-a");
    const b = await hosts.start("host-b");
    const onB = await peer(b, ALICE_TOKEN);
    await a.host.call(ALICE, "session.create", { sessionId: "renamed", title: "before" });
    await a.host.call(ALICE, "session.create", { sessionId: "gone", title: "gone" });
    await until(() => told(onB, "session.added").length === 2 || undefined, 10_000, "both added on B");
    const follow = onB.follow("renamed");
    await onB.waitSeq(follow, 1);
    const control = onB.open("session.control");
    await until(() => onB.items(control).find((i) => i.kind === "baseline"), 10_000, "baseline on B");
    expect(await listed(b)).toEqual(["gone gone", "renamed before"]); // the answer B now keeps
    const heard = tapNotices(b);

    // queued in one tick on A: its group commit writes them in one or two transactions
    await Promise.all([
      a.host.call(ALICE, "session.rename", { sessionId: "renamed", title: "after" }),
      a.host.call(ALICE, "session.delete", { sessionId: "gone" }),
      ...Array.from({ length: MANY }, (_, i) =>
        a.host.call(ALICE, "session.create", { sessionId: longId(i), title: "new" }),
      ),
    ]);

    await until(() => told(onB, "session.added").length === 2 + MANY || undefined, 30_000, "every add on B");
    await until(() => told(onB, "session.removed").includes("gone") || undefined, 10_000, "the delete on B");
    await onB.waitSeq(follow, 2);
    expect(heard.some((text) => decodePayload(text).changes === "all")).toBe(true);
    const added = told(onB, "session.added");
    expect(new Set(added).size).toBe(added.length); // each once
    for (let i = 0; i < MANY; i++) expect(added).toContain(longId(i));
    expect(told(onB, "session.removed")).toEqual(["gone"]);
    expect(told(onB, "session.updated")).toContain("renamed");
    expect(onB.events(follow).map((e) => e.type)).toEqual(["session/created", "session/renamed"]);
    const projected = () =>
      new Set(
        onB
          .items<{ kind: string; sessionId?: string }>(control)
          .flatMap((i) => (i.kind === "projection" && i.sessionId ? [i.sessionId] : [])),
      );
    await until(() => projected().size >= MANY + 1 || undefined, 10_000, "every row on B's control stream");
    for (let i = 0; i < MANY; i++) expect(projected().has(longId(i))).toBe(true);
    expect(projected().has("renamed")).toBe(true);
    // the index answers at most 200 rows: the kept answer of two is gone, and so is `gone`
    const rows = await listed(b);
    expect(rows).toHaveLength(200);
    for (const row of rows) expect(row === "renamed after" || /^batch-\d{4}-x+ new$/.test(row)).toBe(true);
  }, 90_000);
});
