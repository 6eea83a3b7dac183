import { describe, expect, it } from "vitest";
import type { LastState, SessionRow } from "../../protocol/index.js";
import { MAX_PINNED, orderSessions } from "../../web/src/session-list-order.js";

const row = (n: number, lastState: LastState = "completed"): SessionRow => ({
  sessionId: `s${n}`,
  title: `Session ${n}`,
  createdAt: n,
  updatedAt: n * 1000,
  lastPromptAt: n * 1000,
  turnCount: 1,
  blank: false,
  lastState,
  live: false,
  running: false,
  seq: 3,
});

const ids = (rows: SessionRow[]) => rows.map((r) => r.sessionId);

describe("session list order", () => {
  it("puts the newest updatedAt first", () => {
    const { pinned, recent } = orderSessions([row(1), row(3), row(2)]);
    expect(pinned).toEqual([]);
    expect(ids(recent)).toEqual(["s3", "s2", "s1"]);
  });

  it("pins sessions waiting on the operator above newer ones", () => {
    const { pinned, recent } = orderSessions([
      row(1, "input-required"),
      row(5),
      row(4, "input-required"),
      row(3),
    ]);
    expect(ids(pinned)).toEqual(["s4", "s1"]);
    expect(ids(recent)).toEqual(["s5", "s3"]);
  });

  it("caps pins so a pile of parked sessions never hides the newest ones", () => {
    const parked = Array.from({ length: 60 }, (_, i) => row(i + 1, "input-required"));
    const fresh = Array.from({ length: 40 }, (_, i) => row(1000 + i));
    const { pinned, recent } = orderSessions([...parked, ...fresh]);
    expect(pinned).toHaveLength(MAX_PINNED);
    expect(pinned.every((r) => r.lastState === "input-required")).toBe(true);
    // The newest (all unparked) come first among the rest, then the parked ones past the pins.
    expect(ids(recent.slice(0, 40))).toEqual(
      fresh
        .slice()
        .reverse()
        .map((r) => r.sessionId),
    );
    expect(recent).toHaveLength(80);
  });

  it("holds back rows past the end of the pages loaded, but never a pinned one", () => {
    const rows = [row(1), row(2, "input-required"), row(3), row(4), row(5)];
    const { pinned, recent } = orderSessions(rows, { updatedAt: 4000, sessionId: "s4" });
    expect(ids(pinned)).toEqual(["s2"]);
    expect(ids(recent)).toEqual(["s5", "s4"]);
    // ties in updatedAt go by ascending id, as the host orders them
    const tied = [
      { ...row(6), sessionId: "a" },
      { ...row(6), sessionId: "b" },
      { ...row(6), sessionId: "c" },
    ];
    expect(ids(orderSessions(tied, { updatedAt: 6000, sessionId: "b" }).recent)).toEqual(["a", "b"]);
  });

  it("shows parked sessions beyond the cap in their time order", () => {
    const parked = Array.from({ length: 25 }, (_, i) => row(i + 1, "input-required"));
    const { pinned, recent } = orderSessions(parked);
    expect(ids(pinned)).toEqual([
      "s25",
      "s24",
      "s23",
      "s22",
      "s21",
      "s20",
      "s19",
      "s18",
      "s17",
      "s16",
      "s15",
      "s14",
      "s13",
      "s12",
      "s11",
      "s10",
      "s9",
      "s8",
      "s7",
      "s6",
    ]);
    expect(ids(recent)).toEqual(["s5", "s4", "s3", "s2", "s1"]);
  });
});
