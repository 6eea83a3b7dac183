import { describe, expect, it } from "vitest";
import { RunningTurn, TurnStopped } from "../../src/host/live-session.js";

/** The turn a live session runs: what it keeps of steered items, and how it stops. */

describe("a running turn", () => {
  it("lists each steered item once, in the order first steered, and forgets them once taken", () => {
    const turn = new RunningTurn("t1");
    // a client steering the same item over and over grows nothing
    for (let i = 0; i < 1_000; i++) turn.steer("b");
    turn.steer("a");
    turn.steer("b");
    expect(turn.takeSteered()).toEqual(["b", "a"]);
    expect(turn.takeSteered()).toEqual([]);
    turn.steer("c");
    expect(turn.takeSteered()).toEqual(["c"]);
  });

  it("stops once, with the first reason; shut down while waiting on a person it stays parked", () => {
    const turn = new RunningTurn("t1");
    turn.waiting = 1;
    turn.stop("shutdown");
    turn.stop("cancel");
    expect(turn.stopReason).toBe("shutdown");
    expect(turn.leftParked).toBe(true);
    expect(turn.abort.signal.reason).toBeInstanceOf(TurnStopped);
    const idle = new RunningTurn("t2");
    idle.stop("shutdown");
    expect(idle.leftParked).toBe(false);
  });

  it("is left parked only by a shutdown: stopped first for a cancel, a delete or a lost lease while waiting, a later shutdown leaves it to end", () => {
    for (const reason of ["cancel", "delete", "lost"] as const) {
      const turn = new RunningTurn("t1");
      turn.waiting = 1;
      turn.stop(reason);
      expect(turn.leftParked).toBe(false);
      // the agent has not returned yet, still waiting, when the host shuts down
      turn.stop("shutdown");
      expect(turn.leftParked).toBe(false);
      expect(turn.stopReason).toBe(reason);
    }
  });
});
