import { describe, expect, it } from "vitest";
import { steerBlocked } from "../../web/src/steer-offer.js";

/** When the console offers Steer: only where the host takes a steer, a turn its live agent runs. */
describe("steer offer", () => {
  it("is offered while the agent runs the turn, waiting on a person included", () => {
    expect(steerBlocked("running", "running")).toBeUndefined();
    expect(steerBlocked("waiting", "running")).toBeUndefined();
  });

  it("is not offered for a turn parked since its host stopped, cold or held by an attached agent: answer first", () => {
    expect(steerBlocked("waiting", undefined)).toMatch(/until you answer/);
    expect(steerBlocked("waiting", "attached")).toMatch(/until you answer/);
  });

  it("is not offered without a running turn: the prompt starts next", () => {
    for (const agent of [undefined, "attached", "idle"] as const)
      expect(steerBlocked(agent === "idle" ? "idle" : "cold", agent)).toMatch(/starts next/);
  });
});
