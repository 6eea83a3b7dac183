import { describe, expect, it } from "vitest";
import type { Job, SessionEvent } from "../../../protocol/index.js";
import { AgentStatusBoard } from "../../../src/host/live/agent-status.js";
import { RemoteAgents } from "../../../src/host/live/remote-agents.js";

/**
 * Other hosts' agents as this host shows them: what a notice that finds nothing in view changes
 * (nothing), and a lease announced again by the host already shown.
 */

function view() {
  const told: string[] = [];
  const jobDeltas: { sessionId: string; jobs: Job[] }[] = [];
  const status = new AgentStatusBoard((sessionId, state, hostId) =>
    told.push(`${sessionId} ${state}@${hostId}`),
  );
  const remote = new RemoteAgents(status, (sessionId, jobs) => jobDeltas.push({ sessionId, jobs }));
  return { remote, status, told, jobDeltas };
}

let seq = 0;
const event = (type: string, data: Record<string, unknown>) =>
  ({ seq: ++seq, at: 1, type, data }) as unknown as SessionEvent;

describe("other hosts' agents", () => {
  it("a lease announced again by the host already shown leaves a running agent running", () => {
    const { remote, status, told } = view();
    remote.attach("s1", "host-b");
    remote.committed("s1", [event("turn/start", { turnId: "t1" })]);
    remote.attach("s1", "host-b");
    expect(status.get("s1")).toBe("running");
    remote.attach("s1", "host-c");
    expect(told).toEqual(["s1 attached@host-b", "s1 running@host-b", "s1 attached@host-c"]);
  });

  it("the end or progress of a job not in view changes nothing and tells nothing", () => {
    const { remote, jobDeltas } = view();
    // in view with no job list at all (its lease was read after the job started)
    remote.attach("bare", "host-b");
    remote.committed("bare", [event("job/ended", { jobId: "j0", state: "completed" })]);
    remote.progress("bare", "j0", 0.5);
    expect(remote.jobs("bare")).toBeUndefined();
    // in view with a list that does not hold the job
    remote.attach("s1", "host-b", [
      { jobId: "j1", sessionId: "s1", turnId: "t1", label: "build", progress: 0.25, startedAt: 1 },
    ]);
    jobDeltas.length = 0;
    remote.committed("s1", [event("job/ended", { jobId: "j2", state: "failed" })]);
    remote.progress("s1", "j2", 0.75);
    expect(jobDeltas).toEqual([]);
    expect(remote.jobs("s1")).toEqual([{ jobId: "j1", label: "build", progress: 0.25, state: "running" }]);
    // the job it holds still moves
    remote.progress("s1", "j1", 0.5);
    expect(jobDeltas).toEqual([
      { sessionId: "s1", jobs: [{ jobId: "j1", label: "build", progress: 0.5, state: "running" }] },
    ]);
  });
});
