import { describe, expect, it } from "vitest";
import type { ControlItem, Interaction, SessionRow } from "../../protocol/index.js";
import { EMPTY_MIRROR, markStale, reduceControl } from "../../src/client/control-mirror-reducer.js";

const row = (sessionId: string, seq: number, title = `t${seq}`): SessionRow => ({
  sessionId,
  title,
  createdAt: 1,
  updatedAt: 1,
  lastPromptAt: null,
  turnCount: 0,
  blank: false,
  lastState: "idle",
  live: true,
  running: false,
  seq,
});
const interaction = (interactionId: string, sessionId: string): Interaction => ({
  interactionId,
  sessionId,
  turnId: "t",
  kind: "approval",
  requestedAt: 1,
  action: "rm",
});
const baseline = (generation: string): Extract<ControlItem, { kind: "baseline" }> => ({
  kind: "baseline",
  generation,
  agents: [
    { sessionId: "a", state: "running" },
    { sessionId: "b", state: "idle" },
  ],
  queues: [{ sessionId: "a", items: [{ itemId: "q1", text: "next", queuedAt: 1 }] }],
  jobs: [{ sessionId: "a", jobs: [{ jobId: "j1", label: "build", progress: 0.5, state: "running" }] }],
  interactions: [interaction("i1", "a"), interaction("i2", "b")],
  projections: [row("a", 5), row("b", 2)],
});

const apply = (items: ControlItem[], from = EMPTY_MIRROR) => items.reduce(reduceControl, from);

describe("control mirror reducer", () => {
  it("a baseline replaces the whole mirror", () => {
    const dirty = apply([baseline("g1"), { kind: "agent", sessionId: "z", state: "running" }]);
    const m = reduceControl(dirty, {
      ...baseline("g1"),
      agents: [],
      queues: [],
      jobs: [],
      interactions: [],
      projections: [],
    });
    expect(m).toMatchObject({
      agents: {},
      queues: {},
      jobs: {},
      interactions: {},
      projections: {},
      stale: false,
    });
  });

  it("reports a generation change from the second baseline until the next one", () => {
    const first = apply([baseline("g1")]);
    expect(first.generationChanged).toBe(false);
    const restarted = reduceControl(markStale(first), baseline("g2"));
    expect(restarted).toMatchObject({ generation: "g2", generationChanged: true, stale: false });
    const later = reduceControl(restarted, { kind: "queue", sessionId: "a", items: [] });
    expect(later.generationChanged).toBe(true);
    expect(reduceControl(later, baseline("g2")).generationChanged).toBe(false);
  });

  it("queue and jobs snapshots are last-wins", () => {
    const m = apply([
      baseline("g"),
      { kind: "queue", sessionId: "a", items: [] },
      { kind: "jobs", sessionId: "b", jobs: [{ jobId: "j2", label: "x", progress: 1, state: "completed" }] },
    ]);
    expect(m.queues.a).toEqual([]);
    expect(m.jobs.b).toHaveLength(1);
    expect(m.jobs.a).toHaveLength(1);
  });

  it("projections merge by the higher seq, never going back", () => {
    const m = apply([
      baseline("g"),
      { kind: "projection", sessionId: "a", projection: row("a", 9, "new") },
      { kind: "projection", sessionId: "a", projection: row("a", 7, "old") },
      { kind: "projection", sessionId: "c", projection: row("c", 1) },
    ]);
    expect(m.projections.a?.title).toBe("new");
    expect(m.projections.c?.seq).toBe(1);
  });

  it("a row at seq 0, a session just cleared, replaces the old log's row; the new log's rows climb from it", () => {
    const m = apply([
      baseline("g"),
      { kind: "projection", sessionId: "a", projection: row("a", 9, "old log") },
      { kind: "projection", sessionId: "a", projection: row("a", 0, "cleared") },
    ]);
    expect(m.projections.a).toMatchObject({ seq: 0, title: "cleared" });
    const next = reduceControl(m, { kind: "projection", sessionId: "a", projection: row("a", 1, "new log") });
    expect(next.projections.a).toMatchObject({ seq: 1, title: "new log" });
  });

  it("interactions are added and removed", () => {
    const m = apply([
      baseline("g"),
      { kind: "interaction.requested", interaction: interaction("i3", "b") },
      { kind: "interaction.resolved", interactionId: "i1", resolution: { outcome: "approve" } },
    ]);
    expect(Object.keys(m.interactions).sort()).toEqual(["i2", "i3"]);
  });

  it("a withdrawn interaction leaves the mirror", () => {
    const m = apply([baseline("g"), { kind: "interaction.withdrawn", interactionId: "i2" }]);
    expect(Object.keys(m.interactions)).toEqual(["i1"]);
  });

  it("detach clears that session's agent and jobs only: its durable queue and interactions stay", () => {
    const before = apply([baseline("g")]);
    const m = apply([{ kind: "agent", sessionId: "a", state: "detached" }], before);
    expect(m.agents).toEqual({ b: "idle" });
    expect(m.jobs.a).toBeUndefined();
    expect(m.queues.a).toEqual(before.queues.a);
    expect(m.queues.a).toBeDefined();
    expect(Object.keys(m.interactions).sort()).toEqual(["i1", "i2"]);
    expect(m.projections.a?.seq).toBe(5);
  });

  it("never mutates the mirror it was given", () => {
    const before = apply([baseline("g")]);
    const snapshot = structuredClone(before);
    apply(
      [
        { kind: "agent", sessionId: "a", state: "detached" },
        { kind: "queue", sessionId: "b", items: [] },
      ],
      before,
    );
    expect(before).toEqual(snapshot);
  });

  it("markStale keeps the data and flags it", () => {
    const m = markStale(apply([baseline("g")]));
    expect(m.stale).toBe(true);
    expect(m.agents.a).toBe("running");
    // a caller that logs changes sees why the mirror changed
    expect(m.lastChange).toEqual({ kind: "stale" });
  });

  it("the empty mirror is frozen, stale, without a generation and with nothing in it", () => {
    expect(EMPTY_MIRROR).toStrictEqual({
      generation: undefined,
      generationChanged: false,
      stale: true,
      agents: {},
      queues: {},
      jobs: {},
      interactions: {},
      projections: {},
      lastChange: undefined,
    });
    expect(Object.isFrozen(EMPTY_MIRROR)).toBe(true);
  });

  it("an agent state change sets that session's state and keeps the rest of the mirror", () => {
    const before = apply([baseline("g")]);
    const change: ControlItem = { kind: "agent", sessionId: "a", state: "idle" };
    const m = reduceControl(before, change);
    expect(m).toStrictEqual({ ...before, agents: { a: "idle", b: "idle" }, lastChange: change });
    const attached = reduceControl(m, { kind: "agent", sessionId: "c", state: "attached" });
    expect(attached.agents).toEqual({ a: "idle", b: "idle", c: "attached" });
    expect(attached.jobs).toBe(before.jobs);
  });

  it("a projection at the same seq replaces the row: live and running change without a new event", () => {
    const before = apply([baseline("g")]);
    const running = { ...row("a", 5), running: true };
    const m = reduceControl(before, { kind: "projection", sessionId: "a", projection: running });
    expect(m.projections.a).toBe(running);
  });

  it("an item kind from a newer host leaves the mirror as it was", () => {
    const before = apply([baseline("g")]);
    const unknown = { kind: "quota", sessionId: "a" } as unknown as ControlItem;
    expect(reduceControl(before, unknown)).toBe(before);
  });
});
