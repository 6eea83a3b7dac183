import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { Notification } from "../../protocol/index.js";
import type { ControlDelta } from "../../src/host/live/live-state.js";
import type { PgReads } from "../../src/store/postgres/pg-reads.js";
import { delta, turnEnd as turnEndEvent, turnStart } from "../store/open-store.js";
import { holdNotices } from "../store/postgres/held-notices.js";
import {
  ALICE,
  type ClusterHost,
  clusterEachTest,
  createSession,
  forwardedCalls,
  holdTurnStart,
  pgUrl,
  prompt,
  readLog,
  turnEnd,
} from "./multi-host-fixture.js";

/** What `principal`'s sockets on `host` are told: a notification `line` words, one it words not left out. */
function told(
  host: ClusterHost,
  principal: typeof ALICE,
  line: (n: Notification) => string | undefined,
): string[] {
  const list: string[] = [];
  host.host.subscribeNotifications(principal, (n: Notification) => {
    const text = line(n);
    if (text !== undefined) list.push(text);
  });
  return list;
}

/** `added <id>` for a session added, `error <id>` for an agent's error. */
const addedOrError = (n: Notification) =>
  n.name === "session.added"
    ? `added ${n.value.row.sessionId}`
    : n.name === "agent.error"
      ? `error ${n.value.sessionId}`
      : undefined;

/** A session on `a` whose one turn, longer than a read page, failed; once `onB` was told of it. */
async function failedLongSession(a: ClusterHost, onB: string[]): Promise<string> {
  const sourceId = await createSession(a.host);
  const deltas = Array.from({ length: 520 }, (_, i) => delta("t", `part ${i}`));
  await a.store.append(sourceId, [turnStart("t"), ...deltas, turnEndEvent("t", "failed")]);
  await expect.poll(() => onB).toEqual([`added ${sourceId}`, `error ${sourceId}`]);
  return sourceId;
}

// without a database the global setup says the PostgreSQL part did not run (and fails under CI=true)
describe.skipIf(!pgUrl)("several hosts on one PostgreSQL database", () => {
  const clusters = clusterEachTest();

  it("a prompt sent to a host that does not own the session runs on its owner", async () => {
    const cluster = await clusters.open(2);
    const [a, b] = cluster.hosts as [ClusterHost, ClusterHost];
    const sessionId = await createSession(a.host);
    expect(a.host.leases?.lease(sessionId)?.hostId).toBe("host-a");
    const started = await b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("hello there") });
    expect(started.queued).toBe(false);
    expect(await turnEnd(a.store, sessionId, started.turnId!)).toBe("completed");
    // B never ran an agent for it, nor took its lease
    expect(b.host.leases?.lease(sessionId)).toBeUndefined();
    expect(a.host.leases?.lease(sessionId)).toBeDefined();
    expect((await b.store.leaseHolder(sessionId))?.hostId).toBe("host-a");
  });

  it("a prompt its owner takes longer than the forward wait to answer runs there once, and its caller gets its answer", async () => {
    const forwardWait = 500;
    const { a, b, metrics, sessionId } = await clusters.ownedOnA({ forwardTimeoutMs: forwardWait });
    // A, alive and renewing its lease, takes the prompt and is slow to open its turn
    const slow = holdTurnStart(a.store);
    const sent = b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("slow to start") });
    await slow.taken;
    // more than the four forward waits a router would resolve the owner in: B still waits on A
    const early = await Promise.race([
      sent.then(
        (answer) => ({ answer }),
        (err: unknown) => ({ err }),
      ),
      sleep(6 * forwardWait).then(() => "still waiting"),
    ]);
    expect(early).toBe("still waiting");
    slow.release();
    const started = await sent;
    expect(await turnEnd(a.store, sessionId, started.turnId!)).toBe("completed");
    const log = await readLog(a.store, sessionId);
    expect(log.filter((e) => e.type === "turn/start").map((e) => e.data.turnId)).toEqual([started.turnId]);
    expect(log.filter((e) => e.type === "user/message").map((e) => e.data.text)).toEqual(["slow to start"]);
    const forwarded = await forwardedCalls(metrics);
    expect(forwarded).toEqual(['sessionmux_forwarded_calls_total{outcome="ok"} 1']);
  }, 30_000);

  it("queue edits and cancel sent to another host act on the owner's session", async () => {
    const { a, b, metrics, sessionId } = await clusters.ownedOnA();
    const long = await a.host.call(ALICE, "session.prompt", { sessionId, ...prompt("/stream 400 25") });
    const queued = await b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("first draft") });
    expect(queued.queued).toBe(true);
    const edited = await b.host.call(ALICE, "session.updateQueue", {
      sessionId,
      op: { edit: true, itemId: queued.itemId!, text: "edited on b" },
    });
    expect(edited.items.map((i) => i.text)).toEqual(["edited on b"]);
    // an unknown item is the owner's typed error, passed through unchanged
    await expect(
      b.host.call(ALICE, "session.updateQueue", { sessionId, op: { remove: true, itemId: "no-such-item" } }),
    ).rejects.toMatchObject({ code: "queue_item_not_found", data: { itemId: "no-such-item" } });
    expect(await b.host.call(ALICE, "session.cancel", { sessionId })).toEqual({ cancelled: true });
    expect(await turnEnd(a.store, sessionId, long.turnId!)).toBe("cancelled");
    // the edited item then runs on the owner, as edited
    await expect
      .poll(async () =>
        (await readLog(a.store, sessionId)).some(
          (e) => e.type === "user/message" && e.data.text === "edited on b",
        ),
      )
      .toBe(true);
    expect(b.host.leases?.lease(sessionId)).toBeUndefined();
    // B counts what it forwarded: the prompt, the edit and the cancel answered, the removal refused
    const forwarded = await forwardedCalls(metrics);
    expect(forwarded).toEqual([
      'sessionmux_forwarded_calls_total{outcome="ok"} 3',
      'sessionmux_forwarded_calls_total{outcome="error"} 1',
    ]);
  });

  it("16 different answers spread over three hosts: exactly one wins", async () => {
    const cluster = await clusters.open(3);
    const hosts = cluster.hosts;
    const sessionId = await createSession(hosts[0]!.host);
    await hosts[1]!.host.call(ALICE, "session.prompt", { sessionId, ...prompt("/ask which colour?") });
    const interactionId = await expect
      .poll(async () => {
        const log = await readLog(hosts[2]!.store, sessionId);
        const asked = log.find((e) => e.type === "interaction/requested");
        return asked?.type === "interaction/requested" ? asked.data.interactionId : undefined;
      })
      .toBeTypeOf("string")
      .then(async () => {
        const log = await readLog(hosts[2]!.store, sessionId);
        const asked = log.find((e) => e.type === "interaction/requested");
        return asked?.type === "interaction/requested" ? asked.data.interactionId : "";
      });
    const answers = await Promise.allSettled(
      Array.from({ length: 16 }, (_, i) =>
        hosts[i % 3]!.host.call(ALICE, "session.respond", {
          interactionId,
          response: { answer: `colour ${i}` },
        }),
      ),
    );
    const won = answers.filter((a) => a.status === "fulfilled");
    const lost = answers.flatMap((a) => (a.status === "rejected" ? [a.reason as { code: string }] : []));
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(15);
    for (const reason of lost) expect(reason.code).toBe("interaction_already_resolved");
    const resolved = (await readLog(hosts[0]!.store, sessionId)).filter(
      (e) => e.type === "interaction/resolved",
    );
    expect(resolved).toHaveLength(1);
  });

  it("control on one host shows another host's queue, interactions and agent status", async () => {
    const cluster = await clusters.open(2);
    const [a, b] = cluster.hosts as [ClusterHost, ClusterHost];
    const deltas: ControlDelta[] = [];
    b.host.subscribeControl(ALICE, (d) => deltas.push(d));
    const sessionId = await createSession(a.host);
    await expect
      .poll(() =>
        deltas.some((d) => d.kind === "agent" && d.sessionId === sessionId && d.hostId === "host-a"),
      )
      .toBe(true);
    await a.host.call(ALICE, "session.prompt", { sessionId, ...prompt("/ask ready?") });
    const queued = await a.host.call(ALICE, "session.prompt", { sessionId, ...prompt("after the question") });
    await expect
      .poll(() =>
        deltas.some((d) => d.kind === "agent" && d.sessionId === sessionId && d.state === "running"),
      )
      .toBe(true);
    // a baseline taken now on B is the same cut
    await expect
      .poll(async () => {
        const base = await b.host.controlBaseline(ALICE);
        return {
          agent: base.agents.find((x) => x.sessionId === sessionId),
          queue: base.queues.find((q) => q.sessionId === sessionId)?.items.map((i) => i.itemId),
          asked: base.interactions.filter((i) => i.sessionId === sessionId).length,
        };
      })
      .toEqual({
        agent: { sessionId, state: "running", hostId: "host-a" },
        queue: [queued.itemId],
        asked: 1,
      });
    expect(
      deltas.some((d) => d.kind === "interaction.requested" && d.interaction.sessionId === sessionId),
    ).toBe(true);
    // A stopping releases the lease: B shows the agent detached
    await a.host.shutdown();
    await expect
      .poll(() =>
        deltas.some((d) => d.kind === "agent" && d.sessionId === sessionId && d.state === "detached"),
      )
      .toBe(true);
  });
  it("a session created, forked and deleted through one host is added to and removed from the lists of sockets on another (§6)", async () => {
    const cluster = await clusters.open(2);
    const [a, b] = cluster.hosts as [ClusterHost, ClusterHost];
    const BOB = { name: "bob", admin: false };
    const heard = (host: ClusterHost, principal: typeof ALICE) =>
      told(host, principal, (n) =>
        n.name === "session.added"
          ? `added ${n.value.row.sessionId}`
          : n.name === "session.removed"
            ? `removed ${n.value.sessionId}`
            : undefined,
      );
    const onA = heard(a, ALICE);
    const onB = heard(b, ALICE);
    const bobOnB = heard(b, BOB);
    const sessionId = await createSession(a.host);
    const { header } = await a.host.call(ALICE, "session.fork", { sourceId: sessionId });
    const added = [`added ${sessionId}`, `added ${header.sessionId}`];
    // B must have read the create before the delete: a create it reads only once the session is
    // deleted is no news to its sockets, which then hear of the removal alone
    await expect.poll(() => onB, { timeout: 10_000 }).toEqual(added);
    await a.host.call(ALICE, "session.delete", { sessionId });
    const expected = [...added, `removed ${sessionId}`];
    await expect.poll(() => onB, { timeout: 10_000 }).toEqual(expected);
    // the host that made the changes announced each once, and another principal heard none
    expect(onA).toEqual(expected);
    expect(bobOnB).toEqual([]);
  });
  it("a clear through one host is a session.updated with the emptied row on every host, once each (§6)", async () => {
    const cluster = await clusters.open(2);
    const [a, b] = cluster.hosts as [ClusterHost, ClusterHost];
    const sessionId = await createSession(a.host);
    const updates = (host: ClusterHost) =>
      told(host, ALICE, (n) =>
        n.name === "session.updated" && n.value.row.sessionId === sessionId
          ? `${n.value.row.title} ${n.value.row.blank ? "blank" : "prompted"}`
          : undefined,
      );
    const onA = updates(a);
    const onB = updates(b);
    const started = await a.host.call(ALICE, "session.prompt", { sessionId, ...prompt("hello") });
    expect(await turnEnd(a.store, sessionId, started.turnId!)).toBe("completed");
    // B has told the prompt before the clear: what follows is the clear's news alone
    await expect.poll(() => onB.length, { timeout: 10_000 }).toBe(1);
    await a.host.call(ALICE, "session.clear", { sessionId });
    await expect.poll(() => onB.length, { timeout: 10_000 }).toBe(2);
    expect(onB.at(-1)).toBe("hello blank");
    expect(onA).toEqual([onA[0], "hello blank"]);
    await sleep(200);
    expect(onB).toHaveLength(2);
  });

  it("a turn that fails on its owner is reported as agent.error to the sockets of another host too (§6)", async () => {
    const cluster = await clusters.open(2);
    const [a, b] = cluster.hosts as [ClusterHost, ClusterHost];
    const errors = (host: ClusterHost, principal: typeof ALICE) =>
      told(host, principal, (n) =>
        n.name === "agent.error" ? `${n.value.sessionId}: ${n.value.message}` : undefined,
      );
    const onA = errors(a, ALICE);
    const onB = errors(b, ALICE);
    const bobOnB = errors(b, { name: "bob", admin: false });
    const sessionId = await createSession(a.host);
    // sent to B, run by A (the owner), where it fails
    const started = await b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("/fail") });
    expect(await turnEnd(a.store, sessionId, started.turnId!)).toBe("failed");
    const expected = [`${sessionId}: demo failure requested with /fail`];
    await expect.poll(() => onB, { timeout: 10_000 }).toEqual(expected);
    expect(onA).toEqual(expected);
    expect(bobOnB).toEqual([]);
  });
  it("a turn that failed before another host read the session's create is reported there as agent.error too (§6)", async () => {
    const cluster = await clusters.open(2);
    const [a, b] = cluster.hosts as [ClusterHost, ClusterHost];
    const onB = told(b, ALICE, (n) =>
      n.name === "agent.error" ? `${addedOrError(n)}: ${n.value.message}` : addedOrError(n),
    );
    // B hears A's commits only once the turn has failed (as a slow LISTEN connection would): its
    // read for the create then finds the turn's rows too
    const notices = holdNotices(b.store);
    const sessionId = await createSession(a.host);
    const started = await b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("/fail") });
    expect(await turnEnd(a.store, sessionId, started.turnId!)).toBe("failed");
    expect(onB).toEqual([]);
    notices.release();
    await expect
      .poll(() => onB)
      .toEqual([`added ${sessionId}`, `error ${sessionId}: demo failure requested with /fail`]);
  });
  it("a fork longer than a read page, of a turn that just failed, is no agent.error on another host (§6)", async () => {
    const cluster = await clusters.open(2);
    const [a, b] = cluster.hosts as [ClusterHost, ClusterHost];
    const onB = told(b, ALICE, addedOrError);
    const sourceId = await failedLongSession(a, onB);
    // the fork copies the failure, as it was: B reads its rows a page at a time
    const { header } = await a.host.call(ALICE, "session.fork", { sourceId });
    const after = await createSession(a.host);
    // B handles A's NOTIFYs in order: once it told of the next session, it read the whole fork
    await expect.poll(() => onB.at(-1)).toBe(`added ${after}`);
    expect(onB).toEqual([
      `added ${sourceId}`,
      `error ${sourceId}`,
      `added ${header.sessionId}`,
      `added ${after}`,
    ]);
  });

  it("a fork longer than a read page is no agent.error on another host whose read of its second page failed", async () => {
    const cluster = await clusters.open(2);
    const [a, b] = cluster.hosts as [ClusterHost, ClusterHost];
    const onB = told(b, ALICE, addedOrError);
    const sourceId = await failedLongSession(a, onB);
    // B's read of the fork's second page fails once (its connection ended): B listens again,
    // and its re-read reads the rest of the fork, the copied failure among them
    const reads = (b.store as unknown as { feed: { reads: PgReads } }).feed.reads;
    const readAfter = reads.readAfter.bind(reads);
    let failed = false;
    reads.readAfter = async (sessionId, afterSeq, limit) => {
      if (sessionId !== sourceId && afterSeq >= 500 && !failed) {
        failed = true;
        throw new Error("Connection terminated unexpectedly");
      }
      return readAfter(sessionId, afterSeq, limit);
    };
    const toldSeq = new Map<string, number>();
    b.store.subscribeAll((sessionId, notice) => {
      if (notice.kind === "create" || notice.kind === "append")
        toldSeq.set(sessionId, notice.events.at(-1)?.seq ?? 0);
    });
    const { header } = await a.host.call(ALICE, "session.fork", { sourceId });
    const headSeq = (await readLog(a.store, header.sessionId)).at(-1)!.seq;
    // once B delivered the fork up to its head, its sockets were told what they will be told of it
    await expect.poll(() => failed && toldSeq.get(header.sessionId), { timeout: 20_000 }).toBe(headSeq);
    expect(onB.filter((line) => line.endsWith(header.sessionId))).toEqual([`added ${header.sessionId}`]);
  });
});
