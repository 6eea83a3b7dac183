import { describe, expect, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { applyFollowItem, initialCursor, reopenParams } from "../../src/client/follow-cursor.js";

const ev = (seq: number): SessionEvent => ({
  seq,
  at: seq,
  type: "session/renamed",
  data: { title: `t${seq}` },
});

describe("follow cursor", () => {
  it("adopts the epoch from opened and resets caughtUp", () => {
    const step = applyFollowItem(
      { epoch: undefined, seq: 5, caughtUp: true },
      { kind: "opened", epoch: "E", headSeq: 9 },
    );
    expect(step).toMatchObject({ ok: true, cursor: { epoch: "E", seq: 5, caughtUp: false } });
  });

  it("drops events at or below the cursor and applies the rest", () => {
    const step = applyFollowItem(initialCursor(3, "E"), {
      kind: "events",
      events: [ev(2), ev(3), ev(4), ev(5)],
    });
    expect(step.ok).toBe(true);
    if (step.ok) {
      expect(step.cursor.seq).toBe(5);
      expect(step.update).toMatchObject({ kind: "events", events: [ev(4), ev(5)] });
    }
  });

  it("emits nothing for a batch that is entirely old", () => {
    const step = applyFollowItem(initialCursor(10, "E"), { kind: "events", events: [ev(9), ev(10)] });
    expect(step).toEqual({ ok: true, cursor: initialCursor(10, "E"), update: undefined });
  });

  it("reports a gap without applying anything", () => {
    const step = applyFollowItem(initialCursor(3, "E"), { kind: "events", events: [ev(4), ev(6)] });
    expect(step).toEqual({ ok: false, cursor: initialCursor(3, "E"), expectedSeq: 5, gotSeq: 6 });
  });

  it("reset moves to the new epoch at seq 0", () => {
    const step = applyFollowItem(initialCursor(40, "E"), { kind: "reset", epoch: "F" });
    expect(step).toMatchObject({
      ok: true,
      cursor: { epoch: "F", seq: 0 },
      update: { kind: "reset", epoch: "F" },
    });
  });

  it("caughtUp marks the cursor live", () => {
    const step = applyFollowItem(initialCursor(2, "E"), { kind: "caughtUp", seq: 2 });
    expect(step).toMatchObject({
      ok: true,
      cursor: { caughtUp: true },
      update: { kind: "caughtUp", seq: 2 },
    });
  });

  it("reopens after the last applied seq, in its epoch when known", () => {
    expect(reopenParams("s", initialCursor(0))).toEqual({ sessionId: "s", afterSeq: 0 });
    expect(reopenParams("s", initialCursor(7, "E"))).toEqual({ sessionId: "s", afterSeq: 7, epoch: "E" });
  });
});
