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
    // strict: an `epoch: undefined` key would reach the wire as nil, which the host refuses
    expect(reopenParams("s", initialCursor(0))).toStrictEqual({ sessionId: "s", afterSeq: 0 });
    expect(reopenParams("s", initialCursor(7, "E"))).toEqual({ sessionId: "s", afterSeq: 7, epoch: "E" });
  });
});

describe("follow cursor, whole steps", () => {
  it("starts at seq 0, no epoch, not caught up", () => {
    expect(initialCursor()).toEqual({ epoch: undefined, seq: 0, caughtUp: false });
    expect(initialCursor(4, "E")).toEqual({ epoch: "E", seq: 4, caughtUp: false });
  });

  it("opened keeps the seq, takes the epoch, and reports the head", () => {
    const cursor = { epoch: "E", seq: 5, caughtUp: false };
    expect(
      applyFollowItem(
        { epoch: undefined, seq: 5, caughtUp: true },
        { kind: "opened", epoch: "E", headSeq: 9 },
      ),
    ).toEqual({ ok: true, cursor, update: { kind: "opened", epoch: "E", headSeq: 9, cursor } });
  });

  it("opened naming another epoch leaves the cursor's epoch and seq to the reset that follows", () => {
    const cursor = { epoch: "E", seq: 5, caughtUp: false };
    expect(
      applyFollowItem({ epoch: "E", seq: 5, caughtUp: true }, { kind: "opened", epoch: "F", headSeq: 9 }),
    ).toEqual({ ok: true, cursor, update: { kind: "opened", epoch: "F", headSeq: 9, cursor } });
  });

  it("reset drops caughtUp with the seq", () => {
    const cursor = { epoch: "F", seq: 0, caughtUp: false };
    expect(applyFollowItem({ epoch: "E", seq: 40, caughtUp: true }, { kind: "reset", epoch: "F" })).toEqual({
      ok: true,
      cursor,
      update: { kind: "reset", epoch: "F", cursor },
    });
  });

  it("events keep the epoch and caughtUp of the cursor they extend", () => {
    const cursor = { epoch: "E", seq: 5, caughtUp: true };
    expect(
      applyFollowItem(
        { epoch: "E", seq: 3, caughtUp: true },
        { kind: "events", events: [ev(3), ev(4), ev(5)] },
      ),
    ).toEqual({ ok: true, cursor, update: { kind: "events", events: [ev(4), ev(5)], cursor } });
  });

  it("a gap after applied events reports the seq it expected and leaves the cursor where it was", () => {
    const before = { epoch: "E", seq: 3, caughtUp: true };
    expect(applyFollowItem(before, { kind: "events", events: [ev(4), ev(5), ev(7)] })).toEqual({
      ok: false,
      cursor: before,
      expectedSeq: 6,
      gotSeq: 7,
    });
    expect(applyFollowItem(before, { kind: "events", events: [ev(5)] })).toEqual({
      ok: false,
      cursor: before,
      expectedSeq: 4,
      gotSeq: 5,
    });
  });

  it("caughtUp keeps seq and epoch and reports the host's seq", () => {
    const cursor = { epoch: "E", seq: 2, caughtUp: true };
    expect(applyFollowItem(initialCursor(2, "E"), { kind: "caughtUp", seq: 2 })).toEqual({
      ok: true,
      cursor,
      update: { kind: "caughtUp", seq: 2, cursor },
    });
  });
});
