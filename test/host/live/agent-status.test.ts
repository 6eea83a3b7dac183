import { describe, expect, it } from "vitest";
import { AgentStatusBoard } from "../../../src/host/live/agent-status.js";

/** The agent status a control stream reports: one change told once, with the host it runs on. */

function board() {
  const told: string[] = [];
  const status = new AgentStatusBoard((sessionId, state, hostId) =>
    told.push(`${sessionId} ${state}${hostId === undefined ? "" : `@${hostId}`}`),
  );
  return { status, told };
}

describe("agent status", () => {
  it("tells each change once; a single host's rows carry no host at all", () => {
    const { status, told } = board();
    status.set("s1", "attached");
    status.set("s1", "attached");
    status.set("s1", "running");
    expect(told).toEqual(["s1 attached", "s1 running"]);
    expect(status.all()).toEqual([{ sessionId: "s1", state: "running" }]);
    expect(Object.keys(status.all()[0]!)).toEqual(["sessionId", "state"]);
    expect(status.get("s1")).toBe("running");
    expect(status.hostOf("s1")).toBeUndefined();
  });

  it("keeps the host an agent runs on until it moves; a move in the same state is told", () => {
    const { status, told } = board();
    status.set("s2", "attached", "host-b");
    status.set("s2", "running");
    status.set("s2", "running", "host-b");
    status.set("s2", "running", "host-c");
    expect(told).toEqual(["s2 attached@host-b", "s2 running@host-b", "s2 running@host-c"]);
    expect(status.hostOf("s2")).toBe("host-c");
    expect(status.all()).toEqual([{ sessionId: "s2", state: "running", hostId: "host-c" }]);
  });

  it("a removed agent is told detached once, and is gone", () => {
    const { status, told } = board();
    status.set("s1", "idle", "host-b");
    status.remove("s1");
    status.remove("s1");
    status.remove("never");
    expect(told).toEqual(["s1 idle@host-b", "s1 detached"]);
    expect(status.get("s1")).toBeUndefined();
    expect(status.hostOf("s1")).toBeUndefined();
    expect(status.all()).toEqual([]);
  });
});
