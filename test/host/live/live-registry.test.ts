import { describe, expect, it } from "vitest";
import type { JobRecorder } from "../../../src/host/live/job-registry.js";
import { LiveRegistry } from "../../../src/host/live/live-registry.js";
import type { SessionLiveState } from "../../../src/store/live-state-store.js";

/** The control deltas a host's live view sends, and whom each is about (for per-principal filtering). */

const recorder: JobRecorder = { append: async () => undefined, progress: async () => undefined };

function registry(hostId?: string) {
  const live = new LiveRegistry(recorder, hostId);
  const deltas: { delta: Record<string, unknown>; sessionId: string; owner: string }[] = [];
  const stop = live.subscribeWithOwner((delta, sessionId, owner) =>
    deltas.push({ delta: { ...delta }, sessionId, owner }),
  );
  return { live, deltas, stop };
}

describe("the live view's deltas", () => {
  it("a single host's agent deltas name no host, not even as an empty field; each names its owner", () => {
    const { live, deltas } = registry();
    live.attach("s1", "alice");
    live.status.set("s1", "running");
    live.detach("s1");
    expect(deltas).toEqual([
      { delta: { kind: "agent", sessionId: "s1", state: "attached" }, sessionId: "s1", owner: "alice" },
      { delta: { kind: "agent", sessionId: "s1", state: "running" }, sessionId: "s1", owner: "alice" },
      { delta: { kind: "agent", sessionId: "s1", state: "detached" }, sessionId: "s1", owner: "alice" },
    ]);
    for (const { delta } of deltas) expect(Object.keys(delta)).toEqual(["kind", "sessionId", "state"]);
    expect(live.isLive("s1")).toBe(false);
    expect(live.ownerOf("s1")).toBeUndefined();
  });

  it("on a shared store, deltas name the host; a detached one does not; a lease notice of this host moves nothing", () => {
    const { live, deltas } = registry("host-a");
    live.attach("s1", "alice");
    live.apply({ kind: "lease", owner: "alice", sessionId: "s1", hostId: "host-a", generation: 2 });
    // this host's own take of a session it has no agent for yet: its attach will tell
    live.apply({ kind: "lease", owner: "carol", sessionId: "s3", hostId: "host-a", generation: 1 });
    live.apply({ kind: "lease", owner: "bob", sessionId: "s2", hostId: "host-b", generation: 1 });
    live.detach("s1");
    live.apply({ kind: "lease", owner: "bob", sessionId: "s2", hostId: null, generation: 1 });
    expect(deltas.map(({ delta, owner }) => [delta, owner])).toEqual([
      [{ kind: "agent", sessionId: "s1", state: "attached", hostId: "host-a" }, "alice"],
      [{ kind: "agent", sessionId: "s2", state: "attached", hostId: "host-b" }, "bob"],
      [{ kind: "agent", sessionId: "s1", state: "detached" }, "alice"],
      [{ kind: "agent", sessionId: "s2", state: "detached" }, "bob"],
    ]);
    expect(live.agents()).toEqual([]);
    expect(live.ownerOf("s2")).toBeUndefined();
  });

  it("a single host ignores lease notices; a session with no owner here is told nothing; an unsubscribed listener hears nothing", () => {
    const { live, deltas, stop } = registry();
    live.apply({ kind: "lease", owner: "bob", sessionId: "s2", hostId: "host-b", generation: 1 });
    expect(live.agents()).toEqual([]);
    // a status change of a session whose owner this host does not know reaches no listener
    live.status.set("ghost", "running");
    expect(deltas).toEqual([]);
    stop();
    live.attach("s1", "alice");
    expect(deltas).toEqual([]);
    expect(live.isLive("s1")).toBe(true);
    expect(live.isRunning("s1")).toBe(false);
    live.status.set("s1", "running");
    expect(live.isRunning("s1")).toBe(true);
  });

  it("at start, a session's lease shows another host's agent; this host's own lease and a single host's show none", () => {
    const loaded = (sessionId: string, hostId: string): SessionLiveState => ({
      sessionId,
      owner: "alice",
      model: "m",
      queue: [],
      interactions: [],
      parkedTurnId: null,
      jobs: [],
      lease: { sessionId, hostId, generation: 1, expiresAt: Date.now() + 60_000 },
    });
    const shared = registry("host-a");
    // "s-own": held by this host before it restarted; its agent is not running here (yet)
    shared.live.load([loaded("s-own", "host-a"), loaded("s-other", "host-b")]);
    expect(shared.live.agents()).toEqual([{ sessionId: "s-other", state: "attached", hostId: "host-b" }]);
    expect(shared.live.ownerOf("s-own")).toBeUndefined();
    const single = registry();
    // a single host's store keeps leases too: one from before a restart is no other host's agent
    single.live.load([loaded("s1", "host-a")]);
    expect(single.live.agents()).toEqual([]);
    expect(single.live.ownerOf("s1")).toBeUndefined();
    expect(single.deltas).toEqual([]);
  });
});
