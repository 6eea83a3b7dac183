import { describe, expect, it } from "vitest";
import type { Interaction, LastState, LiveAgentState, SessionRow } from "../../protocol/index.js";
import { type ControlMirror, EMPTY_MIRROR, markStale, reduceControl } from "../../src/client/index.js";
import { activityLabel, activityOf, rowWithActivity } from "../../web/src/session-activity.js";

const row = (lastState: LastState, flags: { running?: boolean; live?: boolean } = {}): SessionRow => ({
  sessionId: "s1",
  title: "",
  createdAt: 1,
  updatedAt: 1,
  lastPromptAt: 1,
  turnCount: 1,
  blank: false,
  lastState,
  live: flags.live ?? false,
  running: flags.running ?? false,
  seq: 4,
});

const approval: Interaction = {
  interactionId: "i1",
  sessionId: "s1",
  turnId: "t1",
  kind: "approval",
  requestedAt: 1,
  action: "deploy",
};

/** The mirror after one baseline holding these agents and pending interactions. */
const mirrorOf = (agents: Record<string, LiveAgentState>, interactions: Interaction[] = []): ControlMirror =>
  reduceControl(EMPTY_MIRROR, {
    kind: "baseline",
    generation: "g1",
    agents: Object.entries(agents).map(([sessionId, state]) => ({ sessionId, state })),
    queues: [],
    jobs: [],
    interactions,
    projections: [],
  });

describe("session activity", () => {
  it("waits while a pending interaction of the session is in the mirror, though its agent reports running", () => {
    const activity = activityOf(mirrorOf({ s1: "running", s2: "running" }, [approval]));
    expect(activity("s1")).toBe("waiting");
    expect(activity("s2")).toBe("running");
    expect(activityLabel("waiting")).toBe("waiting for your answer");
    expect(activityLabel("running")).toBe("agent running");
  });

  it("waits for a turn parked by a host restart, which has pending interactions and no live agent", () => {
    expect(activityOf(mirrorOf({}, [approval]))("s1")).toBe("waiting");
  });

  it("follows the mirror once it has a baseline, over an older row", () => {
    const answered = reduceControl(mirrorOf({ s1: "running" }, [approval]), {
      kind: "interaction.resolved",
      interactionId: "i1",
      resolution: { outcome: "approve" },
    });
    expect(activityOf(answered)("s1", row("input-required", { running: true, live: true }))).toBe("running");
    expect(activityOf(mirrorOf({ s1: "idle" }))("s1", row("working", { running: true }))).toBe("idle");
    expect(activityOf(mirrorOf({}))("s1", row("working", { running: true }))).toBe("cold");
  });

  it("keeps the last known activity while the control stream is down", () => {
    expect(activityOf(markStale(mirrorOf({ s1: "running" }, [approval])))("s1")).toBe("waiting");
  });

  it("reads the row until the first baseline", () => {
    for (const mirror of [undefined, EMPTY_MIRROR]) {
      const activity = activityOf(mirror);
      expect(activity("s1", row("input-required", { running: true, live: true }))).toBe("waiting");
      expect(activity("s1", row("working", { running: true, live: true }))).toBe("running");
      expect(activity("s1", row("completed", { live: true }))).toBe("idle");
      expect(activity("s1", row("completed"))).toBe("cold");
      expect(activity("s1")).toBe("cold");
    }
  });

  it("makes the row say what the activity says", () => {
    expect(rowWithActivity(row("working", { running: true }), "waiting")).toMatchObject({
      lastState: "input-required",
      running: true,
    });
    expect(rowWithActivity(row("input-required", { running: true }), "running")).toMatchObject({
      lastState: "working",
      running: true,
    });
    // a new turn started before its row did: running, its state still the previous turn's
    expect(rowWithActivity(row("completed"), "running")).toMatchObject({
      lastState: "completed",
      running: true,
    });
    expect(rowWithActivity(row("completed", { running: true }), "idle")).toMatchObject({
      lastState: "completed",
      running: false,
    });
    // how a turn the live state no longer shows ended is the row's to tell, once its projection comes
    expect(rowWithActivity(row("input-required"), "idle")).toMatchObject({ lastState: "input-required" });
    const unchanged = row("completed");
    expect(rowWithActivity(unchanged, "cold")).toBe(unchanged);
  });
});
