import { describe, expect, test } from "vitest";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { type ContractStore, describeContract, storeFixture } from "./backends.js";

/** The live-state contract of both stores: outcomes as values, rows and events in one transaction. */

const S = "live";

async function parked(store: ContractStore, turnId = "t1", interactionId = "i1") {
  await store.append(S, [
    turnStart(turnId),
    userMessage("/approve x"),
    { type: "interaction/requested", data: { turnId, interactionId, kind: "approval", action: "x" } },
  ]);
}

describeContract("live state", (backend) => {
  const open = storeFixture(backend);
  describe("queue items", () => {
    test("enqueue records the prompt key; a repeat is a duplicate; limits refuse without writing", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      const limits = { maxItemsPerSession: 2, maxBytesPerOwner: 10 };
      const queued = await store.enqueuePrompt({
        sessionId: S,
        itemId: "a",
        queuedAt: 1,
        input: { clientMessageId: "ka", text: "aaaa" },
        limits,
      });
      expect(queued.status).toBe("queued");
      expect(await store.findPrompt(S, "ka")).toEqual({ queued: true, itemId: "a" });
      expect(
        await store.enqueuePrompt({
          sessionId: S,
          itemId: "a2",
          queuedAt: 2,
          input: { clientMessageId: "ka", text: "again" },
          limits,
        }),
      ).toEqual({ status: "duplicate", record: { queued: true, itemId: "a" } });
      expect(
        await store.enqueuePrompt({
          sessionId: S,
          itemId: "big",
          queuedAt: 3,
          input: { text: "0123456789" },
          limits,
        }),
      ).toEqual({ status: "queue_full", limit: "bytes_per_owner", max: 10 });
      await store.enqueuePrompt({ sessionId: S, itemId: "b", queuedAt: 4, input: { text: "b" }, limits });
      expect(
        await store.enqueuePrompt({ sessionId: S, itemId: "c", queuedAt: 5, input: { text: "c" }, limits }),
      ).toEqual({
        status: "queue_full",
        limit: "items_per_session",
        max: 2,
      });
      expect((await store.queue(S)).map((i) => i.itemId)).toEqual(["a", "b"]);
      expect(
        await store.enqueuePrompt({ sessionId: "nope", itemId: "x", queuedAt: 1, input: { text: "x" } }),
      ).toEqual({
        status: "not_found",
      });
    });

    test("an owner's queued bytes are what the enqueue limit counts, over all its sessions", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await store.create({ sessionId: "s2", owner: "alice", model: "m" });
      await store.create({ sessionId: "s3", owner: "bob", model: "m" });
      expect(await store.queuedBytes("alice")).toBe(0);
      const limits = { maxItemsPerSession: 10, maxBytesPerOwner: 10 };
      const enqueue = (sessionId: string, itemId: string, text: string) =>
        store.enqueuePrompt({ sessionId, itemId, queuedAt: 1, input: { text }, limits });
      await enqueue(S, "a", "aaaa");
      await enqueue("s2", "b", "bbbbb");
      await enqueue("s3", "c", "c");
      expect(await store.queuedBytes("alice")).toBe(9);
      expect(await store.queuedBytes("bob")).toBe(1);
      // one byte more than the limit allows on top of what is held is refused, as the figure says
      expect((await enqueue(S, "d", "dd")).status).toBe("queue_full");
      expect((await enqueue(S, "e", "e")).status).toBe("queued");
      expect(await store.queuedBytes("alice")).toBe(10);
      expect(await store.clearQueue(S)).toMatchObject({ status: "ok" });
      expect(await store.queuedBytes("alice")).toBe(5);
    });

    test("starting an item removes it and rewrites its key in the same append; a gone item appends nothing", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await store.enqueuePrompt({
        sessionId: S,
        itemId: "a",
        queuedAt: 1,
        input: { clientMessageId: "ka", text: "a" },
      });
      const started = await store.append(S, [turnStart("t1"), userMessage("a")], {
        dequeue: { itemId: "a", turnId: "t1" },
      });
      expect(started.status).toBe("appended");
      const seq = started.status === "appended" ? started.events[1]!.seq : 0;
      expect(await store.findPrompt(S, "ka")).toEqual({ queued: false, turnId: "t1", seq });
      expect(await store.queue(S)).toEqual([]);
      expect(
        await store.append(S, [turnStart("t2"), userMessage("a")], {
          dequeue: { itemId: "a", turnId: "t2" },
        }),
      ).toEqual({ status: "queue_item_gone" });
      const log = await store.readAfter(S, 0, 100);
      expect(log.status === "ok" ? log.headSeq : 0).toBe(seq);
    });
  });

  describe("interactions", () => {
    test("first responder wins in one transaction; repeat, conflict, and not_found once withdrawn", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await parked(store);
      await parked(store, "t1", "i2");
      const answers = await Promise.all([
        store.resolveInteraction("i1", { outcome: "approve" }),
        store.resolveInteraction("i1", { outcome: "deny" }),
        store.resolveInteraction("i1", { outcome: "approve" }),
      ]);
      expect(answers.map((a) => a.status)).toEqual(["resolved", "conflict", "repeat"]);
      expect(answers[0]).toMatchObject({ pendingInTurn: 1 });
      expect(answers[1]).toEqual({ status: "conflict", winner: { outcome: "approve" } });
      await store.append(S, [{ type: "turn/end", data: { turnId: "t1", state: "cancelled" } }]);
      expect(await store.resolveInteraction("i2", { outcome: "approve" })).toEqual({ status: "not_found" });
      expect((await store.interaction("i2"))?.state).toBe("withdrawn");
      expect(await store.resolveInteraction("unknown", { answer: "x" })).toEqual({ status: "not_found" });
      const log = await store.readAfter(S, 0, 100);
      const resolved = log.status === "ok" ? log.events.filter((e) => e.type === "interaction/resolved") : [];
      expect(resolved).toHaveLength(1);
    });

    test("a turn's interactions: that session's and that turn's only, answered ones too, by request time then id", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await store.create({ sessionId: "other", owner: "bob", model: "m" });
      const request = (turnId: string, interactionId: string) => ({
        type: "interaction/requested" as const,
        data: { turnId, interactionId, kind: "approval" as const, action: interactionId },
      });
      await store.append("other", [turnStart("t1"), request("t1", "elsewhere")]);
      await store.append(S, [turnStart("t1"), request("t1", "b"), request("t1", "a")], { at: 100 });
      // requested later, with an id that sorts first: time comes before id
      await store.append(S, [request("t1", "0-later")], { at: 200 });
      await store.resolveInteraction("b", { outcome: "approve" });
      const first = await store.turnInteractions(S, "t1");
      expect(first.map((i) => [i.interaction.interactionId, i.state])).toEqual([
        ["a", "pending"],
        ["b", "resolved"],
        ["0-later", "pending"],
      ]);
      expect(first).toEqual([
        await store.interaction("a"),
        await store.interaction("b"),
        await store.interaction("0-later"),
      ]);
      expect(first[0]).toMatchObject({
        owner: "alice",
        interaction: { sessionId: S, turnId: "t1", kind: "approval" },
      });
      expect(await store.turnInteractions(S, "t2")).toEqual([]);
      expect(await store.turnInteractions("missing", "t1")).toEqual([]);
    });

    test("notices follow commits: requested, resolved, withdrawn, and the queue snapshot", async () => {
      const { store } = await open();
      const notices: LiveStateNotice[] = [];
      store.subscribeLive((n) => notices.push(n));
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await parked(store);
      await store.enqueuePrompt({ sessionId: S, itemId: "a", queuedAt: 1, input: { text: "a" } });
      await store.resolveInteraction("i1", { outcome: "deny" });
      await parked(store, "t1", "i3");
      await store.delete(S);
      expect(notices.map((n) => n.kind)).toEqual([
        "interaction.requested",
        "queue",
        "interaction.resolved",
        "interaction.requested",
        "interaction.withdrawn",
        "queue",
      ]);
      expect(notices.at(-1)).toEqual({ kind: "queue", sessionId: S, owner: "alice", items: [] });
    });

    test("a turn's end announces the withdrawal of each question it leaves open, and nothing for its text", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await parked(store);
      await store.append(S, [delta("t1", "some "), delta("t1", "text")]);
      const notices: LiveStateNotice[] = [];
      store.subscribeLive((n) => notices.push(n));
      await store.append(S, [turnEnd("t1")]);
      expect(notices).toEqual([
        { kind: "interaction.withdrawn", owner: "alice", sessionId: S, interactionId: "i1" },
      ]);
    });
  });

  test("a turn's end withdraws the questions it leaves open and keeps the answered ones answered", async () => {
    const { store } = await open();
    await store.create({ sessionId: S, owner: "alice", model: "m" });
    await parked(store, "t1", "i1");
    await store.append(S, [
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i2", kind: "approval", action: "y" },
      },
    ]);
    await store.resolveInteraction("i1", { outcome: "approve" });
    await store.append(S, [turnEnd("t1")]);
    expect(
      (await store.turnInteractions(S, "t1")).map((i) => [i.interaction.interactionId, i.state]),
    ).toEqual([
      ["i1", "resolved"],
      ["i2", "withdrawn"],
    ]);
    expect((await store.interaction("i1"))?.resolution).toEqual({ outcome: "approve" });
  });

  describe("restart support", () => {
    test("interruptOpenTurns leaves parked turns open; pages list live state", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await store.create({ sessionId: "running", owner: "bob", model: "m" });
      await parked(store);
      await store.append("running", [turnStart("r1")]);
      await store.enqueuePrompt({ sessionId: "running", itemId: "q", queuedAt: 1, input: { text: "next" } });
      expect(await store.interruptOpenTurns(10)).toEqual(["running"]);
      expect((await store.projection(S))?.openTurnId).toBe("t1");
      const first = await store.liveStatePage(null, 1);
      const second = await store.liveStatePage(first.next, 1);
      expect(
        [...first.sessions, ...second.sessions].map((s) => [s.sessionId, s.parkedTurnId, s.queue.length]),
      ).toEqual([
        [S, "t1", 0],
        ["running", null, 1],
      ]);
      expect((await store.liveStatePage(second.next, 1)).sessions).toEqual([]);
    });

    test("interruptOpenTurns closes a turn whose question was answered: only a pending one parks it", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await parked(store);
      expect(await store.resolveInteraction("i1", { outcome: "approve" })).toMatchObject({
        status: "resolved",
      });
      // the answer resumed the turn: it runs on, open, with nothing left pending
      expect((await store.projection(S))?.openTurnId).toBe("t1");
      expect(await store.interruptOpenTurns(10)).toEqual([S]);
      expect((await store.projection(S))?.openTurnId).toBeNull();
    });

    test("a page of several sessions gives each its own queue, questions, running jobs and lease, in session id order", async () => {
      const { store } = await open();
      const job = (jobId: string, label: string) => ({
        type: "job/started" as const,
        data: { jobId, turnId: "t1", label },
      });
      const ask = (turnId: string, interactionId: string) => ({
        type: "interaction/requested" as const,
        data: { turnId, interactionId, kind: "approval" as const, action: interactionId },
      });
      // created out of id order; "0-parked" sorts before every letter and is written last
      for (const [sessionId, owner, model] of [
        ["c-working", "carol", "mc"],
        ["a-idle", "alice", "ma"],
        ["e-elsewhere", "erin", "me"],
        ["b-queued", "bob", "mb"],
        ["0-parked", "zoe", "m0"],
      ] as const)
        await store.create({ sessionId, owner, model });
      await store.append("a-idle", [turnStart("t1"), turnEnd("t1")]);
      await store.append("c-working", [turnStart("t1"), job("j3", "lint"), job("j2", "test")], { at: 200 });
      await store.append("c-working", [job("j1", "build")], { at: 100 });
      await store.append("c-working", [{ type: "job/ended", data: { jobId: "j3", state: "completed" } }]);
      expect(await store.setJobProgress("j2", 0.5)).toEqual({ status: "ok" });
      const released = await store.acquireLease("c-working", "host-a", 60_000);
      if (released.status !== "acquired") throw new Error(released.status);
      await store.releaseLease(released.lease);
      // a question of a turn other than the open one does not park it
      await store.append("e-elsewhere", [turnStart("t2"), ask("t1", "x")]);
      await store.append("b-queued", [turnStart("t1")]);
      for (const itemId of ["qb1", "qb2"])
        await store.enqueuePrompt({ sessionId: "b-queued", itemId, queuedAt: 1, input: { text: itemId } });
      await store.enqueuePrompt({
        sessionId: "0-parked",
        itemId: "q0",
        queuedAt: 2,
        input: { text: "next" },
      });
      const held = await store.acquireLease("0-parked", "host-a", 60_000);
      if (held.status !== "acquired") throw new Error(held.status);
      await store.append("0-parked", [turnStart("t1"), ask("t1", "i3"), ask("t1", "i2")], { at: 300 });
      await store.append("0-parked", [ask("t1", "i1")], { at: 400 });
      await store.resolveInteraction("i3", { outcome: "approve" });

      const page = await store.liveStatePage(null, 10);
      expect(page.next).toBeNull();
      const pending = async (...ids: string[]) =>
        Promise.all(ids.map(async (id) => (await store.interaction(id))!.interaction));
      const queue = (sessionId: string, owner: string, ...items: [string, number, string][]) =>
        items.map(([itemId, queuedAt, text]) => ({ itemId, sessionId, owner, queuedAt, input: { text } }));
      const running = (jobId: string, label: string, progress: number, startedAt: number) => ({
        jobId,
        sessionId: "c-working",
        turnId: "t1",
        label,
        progress,
        startedAt,
      });
      expect(page.sessions).toEqual([
        {
          sessionId: "0-parked",
          owner: "zoe",
          model: "m0",
          queue: queue("0-parked", "zoe", ["q0", 2, "next"]),
          interactions: await pending("i2", "i1"),
          parkedTurnId: "t1",
          jobs: [],
          lease: { ...held.lease, expiresAt: held.expiresAt },
        },
        {
          sessionId: "b-queued",
          owner: "bob",
          model: "mb",
          queue: queue("b-queued", "bob", ["qb1", 1, "qb1"], ["qb2", 1, "qb2"]),
          interactions: [],
          parkedTurnId: null,
          jobs: [],
          lease: null,
        },
        {
          sessionId: "c-working",
          owner: "carol",
          model: "mc",
          queue: [],
          interactions: [],
          parkedTurnId: null,
          jobs: [running("j1", "build", 0, 100), running("j2", "test", 0.5, 200)],
          lease: null,
        },
        {
          sessionId: "e-elsewhere",
          owner: "erin",
          model: "me",
          queue: [],
          interactions: await pending("x"),
          parkedTurnId: null,
          jobs: [],
          lease: null,
        },
      ]);
    });
  });

  describe("live state pages", () => {
    test("a session whose open turn waits on no interaction is not parked; a short page is the last", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await store.create({ sessionId: "running", owner: "bob", model: "m" });
      await parked(store);
      await store.append("running", [turnStart("r1"), userMessage("working")]);
      await store.enqueuePrompt({ sessionId: "running", itemId: "q", queuedAt: 1, input: { text: "next" } });

      const page = await store.liveStatePage(null, 3);

      expect(
        page.sessions.map((s) => [s.sessionId, s.parkedTurnId, s.queue.length, s.interactions.length]),
      ).toEqual([
        [S, "t1", 0, 1],
        ["running", null, 1, 0],
      ]);
      // fewer sessions than asked for: nothing to continue from
      expect(page.next).toBeNull();
    });

    test("an answered question and an ended job leave nothing live: neither session is on the page", async () => {
      const { store } = await open();
      await store.create({ sessionId: "answered", owner: "alice", model: "m" });
      await store.create({ sessionId: "worked", owner: "bob", model: "m" });
      await store.append("answered", [
        turnStart("t1"),
        {
          type: "interaction/requested",
          data: { turnId: "t1", interactionId: "i1", kind: "approval", action: "x" },
        },
      ]);
      await store.resolveInteraction("i1", { outcome: "approve" });
      await store.append("answered", [turnEnd("t1")]);
      await store.append("worked", [
        turnStart("t1"),
        { type: "job/started", data: { jobId: "j1", turnId: "t1", label: "build" } },
        { type: "job/ended", data: { jobId: "j1", state: "completed" } },
        turnEnd("t1"),
      ]);
      // both rows are kept, answered and ended: only their state leaves them off the page
      expect((await store.interaction("i1"))?.state).toBe("resolved");
      const page = await store.liveStatePage(null, 10);
      expect(page.sessions).toEqual([]);
      expect(page.next).toBeNull();
    });

    test("a turn started over a turn still waiting is not parked on the older turn's request", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await parked(store, "t1", "i1");
      // a log may start a turn without ending the open one: its request stays pending, the new turn waits on nothing
      await store.append(S, [turnStart("t2"), userMessage("next")]);

      const page = await store.liveStatePage(null, 10);

      expect(page.sessions.map((s) => [s.parkedTurnId, s.interactions.map((i) => i.turnId)])).toEqual([
        [null, ["t1"]],
      ]);
    });
  });

  describe("forks", () => {
    test("a fork of a parked session copies the log, not the pending interaction", async () => {
      const { store } = await open();
      const notices: LiveStateNotice[] = [];
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await parked(store);
      store.subscribeLive((n) => notices.push(n));
      const fork = await store.fork({ sourceId: S, targetId: "copy", owner: "alice" });
      expect(fork.status).toBe("created");
      expect(notices).toEqual([]);
      expect((await store.interaction("i1"))?.interaction.sessionId).toBe(S);
      expect((await store.interaction("i1"))?.state).toBe("pending");
      const page = await store.liveStatePage(null, 10);
      expect(page.sessions.map((s) => s.sessionId)).toEqual([S]);
    });

    test("a fork of a session with a running job copies the log, not the job", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      await store.append(S, [
        turnStart("t1"),
        { type: "job/started", data: { jobId: "j1", turnId: "t1", label: "build" } },
      ]);
      const fork = await store.fork({ sourceId: S, targetId: "copy", owner: "alice" });
      expect(fork.status).toBe("created");
      const page = await store.liveStatePage(null, 10);
      expect(page.sessions.map((s) => [s.sessionId, s.jobs.map((j) => [j.jobId, j.label])])).toEqual([
        [S, [["j1", "build"]]],
      ]);
    });
  });
});
