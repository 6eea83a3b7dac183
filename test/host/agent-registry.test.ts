import { afterEach, describe, expect, it, vi } from "vitest";
import type { NewEvent } from "../../protocol/index.js";
import { AgentRegistry } from "../../src/host/agent-registry.js";
import { LiveRegistry } from "../../src/host/live/live-registry.js";
import { RunningTurn } from "../../src/host/live-session.js";
import { capturedLogger } from "../support/log-capture.js";

const IDLE_MS = 1_000;

/** An agent registry over a real live registry whose job writes are kept in `written`. */
function registry(options: { max?: number } = {}) {
  const written: { sessionId: string; event: NewEvent }[] = [];
  const live = new LiveRegistry({
    append: async (sessionId, event) => {
      written.push({ sessionId, event });
    },
    progress: async () => undefined,
  });
  const detached: string[] = [];
  const { logger, lines } = capturedLogger();
  const agents = new AgentRegistry({
    live,
    idleDetachMs: IDLE_MS,
    maxLiveAgentsPerOwner: options.max ?? 10,
    logger,
    onDetached: (sessionId) => detached.push(sessionId),
  });
  return { agents, live, written, detached, lines };
}

const info = { owner: "o", model: "m" };

afterEach(() => {
  vi.useRealTimers();
});

describe("the agent registry", () => {
  it("restarts an idle agent's clock each time it is asked for, and detaches it one idle period after the last", () => {
    vi.useFakeTimers();
    const { agents, detached } = registry();
    const session = agents.attach("a", info);
    vi.advanceTimersByTime(IDLE_MS - 1);
    expect(agents.attach("a", info)).toBe(session);
    vi.advanceTimersByTime(IDLE_MS - 1);
    expect(agents.get("a")).toBe(session);
    vi.advanceTimersByTime(1);
    expect(agents.get("a")).toBeUndefined();
    expect(detached).toEqual(["a"]);
  });

  it("keeps an agent with a turn past its idle period, and detaches it one period after it goes idle", () => {
    vi.useFakeTimers();
    const { agents, live } = registry();
    const session = agents.attach("a", info);
    session.turn = new RunningTurn("t1");
    agents.markRunning(session);
    vi.advanceTimersByTime(3 * IDLE_MS);
    expect(agents.get("a")).toBe(session);
    session.turn = undefined;
    agents.markIdle(session);
    expect(live.agents()).toEqual([{ sessionId: "a", state: "idle" }]);
    vi.advanceTimersByTime(IDLE_MS);
    expect(agents.get("a")).toBeUndefined();
  });

  it("gives a session whose turn waits on a person a parked turn, so prompts queue behind it", () => {
    const { agents, live } = registry();
    live.load([
      {
        sessionId: "a",
        owner: "o",
        model: "m",
        queue: [],
        interactions: [
          {
            interactionId: "i1",
            sessionId: "a",
            turnId: "t-parked",
            kind: "question",
            requestedAt: 1,
            question: "?",
          },
        ],
        parkedTurnId: "t-parked",
        jobs: [],
        lease: null,
      },
    ]);
    const parked = agents.attach("a", info);
    expect(parked.turn?.turnId).toBe("t-parked");
    expect(parked.turn?.parked).toBe(true);
    expect(agents.attach("b", info).turn).toBeUndefined();
  });

  it("detaches idle agents, least recently asked for first, to make room; refuses when every one is at work", () => {
    const { agents } = registry({ max: 2 });
    const a = agents.attach("a", info);
    agents.attach("b", info);
    // asked for again: b is now the least recently used
    expect(agents.attach("a", info)).toBe(a);
    agents.attach("c", info);
    expect(agents.get("b")).toBeUndefined();
    expect(agents.all().map((s) => s.sessionId)).toEqual(["a", "c"]);
    for (const session of agents.all()) session.turn = new RunningTurn(`t-${session.sessionId}`);
    expect(() => agents.attach("d", info)).toThrowError(
      expect.objectContaining({
        code: "too_many_agents",
        message: "o already has 2 agents at work; wait for a turn to finish or cancel one",
        data: { sessionId: "d", max: 2 },
      }),
    );
    // another owner has a limit of its own
    expect(agents.attach("e", { owner: "p", model: "m" }).owner).toBe("p");
  });

  it("makes room with the last idle agent it finds, the most recently asked for", () => {
    const { agents } = registry({ max: 2 });
    agents.attach("a", info).turn = new RunningTurn("t-a");
    agents.attach("b", info);
    expect(agents.attach("c", info).sessionId).toBe("c");
    expect(agents.all().map((s) => s.sessionId)).toEqual(["a", "c"]);
  });

  it("counts an owner's agents still live after one of them detaches", () => {
    const { agents } = registry({ max: 2 });
    for (const id of ["a", "b"]) agents.attach(id, info).turn = new RunningTurn(`t-${id}`);
    agents.detach("a");
    agents.attach("c", info).turn = new RunningTurn("t-c");
    expect(() => agents.attach("d", info)).toThrowError(expect.objectContaining({ code: "too_many_agents" }));
    expect(agents.all().map((s) => s.sessionId)).toEqual(["b", "c"]);
  });

  it("ends a detached session's running jobs cancelled unless told otherwise, and ignores an unknown session", async () => {
    const { agents, live, written, detached } = registry();
    agents.attach("a", info);
    agents.attach("b", info);
    live.jobRegistry.start("a", "alice", "t1", "build");
    live.jobRegistry.start("b", "alice", "t2", "test");
    agents.detach("a");
    agents.detach("b", "interrupted");
    agents.detach("nobody");
    await live.jobRegistry.settled();
    const ends = written.filter(({ event }) => event.type === "job/ended");
    expect(ends.map(({ sessionId, event }) => [sessionId, (event.data as { state: string }).state])).toEqual([
      ["a", "cancelled"],
      ["b", "interrupted"],
    ]);
    expect(detached).toEqual(["a", "b"]);
  });

  it("once closed, refuses new agents, stops every idle clock and leaves a turn's status alone", () => {
    vi.useFakeTimers();
    const { agents, live } = registry();
    const idle = agents.attach("a", info);
    const busy = agents.attach("b", info);
    busy.turn = new RunningTurn("t1");
    agents.markRunning(busy);
    agents.close();
    expect(() => agents.attach("c", info)).toThrowError(
      expect.objectContaining({
        code: "host_shutting_down",
        message: "the host is shutting down; reconnect shortly",
      }),
    );
    busy.turn = undefined;
    agents.markIdle(busy);
    vi.advanceTimersByTime(10 * IDLE_MS);
    expect(agents.all()).toEqual([idle, busy]);
    expect(live.agents()).toEqual([
      { sessionId: "a", state: "attached" },
      { sessionId: "b", state: "running" },
    ]);
  });

  it("logs each attach and detach with its session", () => {
    const { agents, lines } = registry();
    agents.attach("a", info);
    agents.detach("a");
    expect(lines.map((line) => [line.msg, line.sessionId])).toEqual([
      ["agent attached", "a"],
      ["agent detached", "a"],
    ]);
  });
});
