import { afterEach, describe, expect, test, vi } from "vitest";
import type { Notification } from "../../protocol/index.js";
import type { ControlDelta } from "../../src/host/live/live-state.js";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost, turnEvents } from "./host-fixture.js";

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "watched";

describe("session.control feed", () => {
  test("the baseline holds live sessions only, each projection tagged with the seq it reflects", async () => {
    fx = await openHost();
    await fx.store.create({ sessionId: "cold-one", owner: "admin", model: "demo-fast" });
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/ask ready?",
      clientMessageId: "1",
    });
    await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "later", clientMessageId: "2" });
    await vi.waitFor(async () => expect((await fx.store.projection(S))?.lastState).toBe("input-required"));
    const baseline = await fx.host.controlBaseline(ADMIN);
    expect(baseline.generation).toBe(fx.host.generation);
    expect(baseline.agents).toEqual([{ sessionId: S, state: "running" }]);
    expect(baseline.queues).toEqual([{ sessionId: S, items: [expect.objectContaining({ text: "later" })] }]);
    expect(baseline.interactions).toEqual([
      expect.objectContaining({ sessionId: S, turnId: r.turnId, kind: "question", question: "ready?" }),
    ]);
    const head = await fx.store.header(S);
    expect(baseline.projections).toEqual([
      expect.objectContaining({
        sessionId: S,
        live: true,
        running: true,
        lastState: "input-required",
        seq: head.status === "ok" ? head.headSeq : -1,
      }),
    ]);
  });

  test("deltas: agent states, queue and job snapshots, interactions and projections with rising seq", async () => {
    fx = await openHost();
    const deltas: ControlDelta[] = [];
    fx.host.subscribeControl(ADMIN, (d) => deltas.push(d));
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/approve ship",
      clientMessageId: "1",
    });
    await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "/job 0.1", clientMessageId: "2" });
    const interaction = await vi.waitFor(() => {
      const found = deltas.find((d) => d.kind === "interaction.requested");
      expect(found).toBeDefined();
      return found as Extract<ControlDelta, { kind: "interaction.requested" }>;
    });
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: interaction.interaction.interactionId,
      response: { outcome: "approve" },
    });
    await turnEvents(fx.store, S, r.turnId!);
    await vi.waitFor(() =>
      expect(deltas.some((d) => d.kind === "jobs" && d.jobs[0]?.state === "completed")).toBe(true),
    );

    const agentStates = deltas.flatMap((d) => (d.kind === "agent" ? [d.state] : []));
    expect(agentStates.slice(0, 2)).toEqual(["attached", "running"]);
    expect(agentStates.at(-1)).toBe("idle");
    expect(deltas.filter((d) => d.kind === "queue").map((d) => d.kind === "queue" && d.items.length)).toEqual(
      [1, 0],
    );
    expect(deltas).toContainEqual({
      kind: "interaction.resolved",
      interactionId: interaction.interaction.interactionId,
      resolution: { outcome: "approve" },
    });
    const progress = deltas.flatMap((d) => (d.kind === "jobs" ? [d.jobs[0]!.progress] : []));
    expect(progress[0]).toBe(0);
    expect(progress.at(-1)).toBe(1);
    expect([...progress].sort((a, b) => a - b)).toEqual(progress);
    const seqs = deltas.flatMap((d) => (d.kind === "projection" ? [d.projection.seq] : []));
    expect(seqs.length).toBeGreaterThan(3);
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs);
    // Each projection row is one cut at its seq: running exactly while the log shows an open turn.
    const rows = deltas.flatMap((d) => (d.kind === "projection" ? [d.projection] : []));
    for (const row of rows) {
      const open = row.lastState === "working" || row.lastState === "input-required";
      expect({ seq: row.seq, running: row.running }).toEqual({ seq: row.seq, running: open });
    }
  });
});

describe("notifications", () => {
  test("session.added, session.updated on prompt and rename, agent.error on a failed turn, session.removed", async () => {
    fx = await openHost();
    const seen: Notification[] = [];
    fx.host.subscribeNotifications(ADMIN, (n) => seen.push(n));
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    expect(seen.map((n) => n.name)).toEqual(["session.added"]);
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/fail",
      clientMessageId: "1",
    });
    await turnEvents(fx.store, S, r.turnId!);
    await fx.host.call(ADMIN, "session.rename", { sessionId: S, title: "Renamed" });
    await fx.host.call(ADMIN, "session.fork", { sourceId: S, sessionId: "copy" });
    await fx.host.call(ADMIN, "session.delete", { sessionId: S });
    expect(seen.map((n) => n.name)).toEqual([
      "session.added",
      "session.updated",
      "agent.error",
      "session.updated",
      "session.added",
      "session.removed",
    ]);
    expect(seen[1]).toMatchObject({ value: { row: { sessionId: S, blank: false, seq: r.seq } } });
    expect(seen[2]).toEqual({
      name: "agent.error",
      value: { sessionId: S, message: expect.stringContaining("/fail") },
    });
    expect(seen[3]).toMatchObject({ value: { row: { title: "Renamed" } } });
    expect(seen[4]).toMatchObject({ value: { row: { sessionId: "copy" } } });
    expect(seen[5]).toEqual({ name: "session.removed", value: { sessionId: S } });
  });
});

describe("session.control baseline: what each principal sees", () => {
  const alice = { name: "alice", admin: false };
  const bob = { name: "bob", admin: false };

  /** A session of `who` with a question pending, a prompt queued behind it, and one with a job running. */
  async function busy(who: typeof alice) {
    const asked = `${who.name}-asked`;
    await fx.host.call(who, "session.create", { sessionId: asked });
    await fx.host.call(who, "session.prompt", {
      sessionId: asked,
      text: "/ask ready?",
      clientMessageId: "1",
    });
    await fx.host.call(who, "session.prompt", { sessionId: asked, text: "later", clientMessageId: "2" });
    const working = `${who.name}-working`;
    await fx.host.call(who, "session.create", { sessionId: working });
    await fx.host.call(who, "session.prompt", { sessionId: working, text: "/job 60", clientMessageId: "1" });
    await vi.waitFor(async () => {
      const own = await fx.host.controlBaseline(who);
      expect(own.interactions).toHaveLength(1);
      expect(own.jobs).toHaveLength(1);
    });
  }

  test("a principal's baseline holds its own queues, questions, jobs, agents and rows only; an admin's holds all", async () => {
    fx = await openHost();
    await busy(alice);
    await busy(bob);
    const sessionsOf = (b: Awaited<ReturnType<typeof fx.host.controlBaseline>>) => ({
      agents: b.agents.map((a) => a.sessionId).sort(),
      queues: b.queues.map((q) => q.sessionId).sort(),
      interactions: b.interactions.map((i) => i.sessionId).sort(),
      jobs: b.jobs.map((j) => j.sessionId).sort(),
      projections: b.projections.map((p) => p.sessionId).sort(),
    });
    const own = (name: string) => ({
      agents: [`${name}-asked`, `${name}-working`],
      queues: [`${name}-asked`],
      interactions: [`${name}-asked`],
      jobs: [`${name}-working`],
      projections: [`${name}-asked`, `${name}-working`],
    });
    expect(sessionsOf(await fx.host.controlBaseline(bob))).toEqual(own("bob"));
    expect(sessionsOf(await fx.host.controlBaseline(alice))).toEqual(own("alice"));
    const all = sessionsOf(await fx.host.controlBaseline(ADMIN));
    expect(all).toEqual({
      agents: [...own("alice").agents, ...own("bob").agents],
      queues: [...own("alice").queues, ...own("bob").queues],
      interactions: [...own("alice").interactions, ...own("bob").interactions],
      jobs: [...own("alice").jobs, ...own("bob").jobs],
      projections: [...own("alice").projections, ...own("bob").projections],
    });
  });

  test("past one batch of projections (64), each live session's row comes once", async () => {
    fx = await openHost();
    const ids = Array.from({ length: 70 }, (_, i) => `s${String(i).padStart(2, "0")}`);
    for (const sessionId of ids) {
      await fx.host.call(ADMIN, "session.create", { sessionId });
      await fx.host.call(ADMIN, "session.prompt", { sessionId, text: "/ask ready?", clientMessageId: "1" });
    }
    await vi.waitFor(async () =>
      expect((await fx.host.controlBaseline(ADMIN)).interactions).toHaveLength(70),
    );
    const baseline = await fx.host.controlBaseline(ADMIN);
    expect(baseline.kind).toBe("baseline");
    expect(baseline.projections.map((p) => p.sessionId).sort()).toEqual(ids);
  });
});
