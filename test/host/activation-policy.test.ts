import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { type Activation, SessionmuxError } from "../../protocol/index.js";
import { ActivationPolicy } from "../../src/host/activation-policy.js";
import { AgentRegistry } from "../../src/host/agent-registry.js";
import { LiveRegistry } from "../../src/host/live/live-registry.js";
import type { LiveSession } from "../../src/host/live-session.js";
import { ADMIN, type Principal } from "../../src/host/principal.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { gate } from "../support/gate.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * The resolvers each activation gets (§4), against a real SQLite store: a method may use only the
 * resolvers of its activation, a live session is found without reading the store, and a foreign
 * session reads exactly like a missing one. `activation-table.test.ts` checks every method of
 * the table through the host.
 */
const ALICE: Principal = { name: "alice", admin: false };
const APPROVE = { outcome: "approve" } as const;
const BOB: Principal = { name: "bob", admin: false };

const cleanups = cleanupsAfterEach();

/** The agent registry's two questions, answered from a map: attach is get-or-create. */
function agentsOf(live: Map<string, LiveSession>) {
  const attached: { sessionId: string; info: { owner: string; model: string } }[] = [];
  const agents = {
    get: (sessionId: string) => live.get(sessionId),
    attach: (sessionId: string, info: { owner: string; model: string }) => {
      attached.push({ sessionId, info });
      const existing = live.get(sessionId);
      if (existing) return existing;
      const session = { sessionId, owner: info.owner, model: info.model } as unknown as LiveSession;
      live.set(sessionId, session);
      return session;
    },
  } as unknown as AgentRegistry;
  return { agents, attached };
}

async function setup(onWork?: (principal: Principal, sessionId: string) => Promise<void> | void) {
  const dir = tempDir("sessionmux-activation-");
  const store = SqliteSessionStore.open(dir.file("s.db"));
  cleanups.push(() => dir.remove());
  cleanups.push(() => store.close());
  await store.create({ sessionId: "a1", owner: "alice", model: "demo" });
  const live = new Map<string, LiveSession>();
  const { agents, attached } = agentsOf(live);
  const policy = new ActivationPolicy(store, agents, onWork ? { onWork } : {});
  const headers = vi.spyOn(store, "header");
  return { store, live, attached, policy, headers };
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof SessionmuxError)) throw new Error(`expected a SessionmuxError, got ${String(err)}`);
  return err.code;
}

function forbiddenCall(call: () => unknown, activation: Activation, resolver: string): void {
  let thrown: unknown;
  try {
    call();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(SessionmuxError);
  expect((thrown as SessionmuxError).code).toBe("internal_error");
  // the message is for the developer who wired a method to the wrong resolver
  expect((thrown as Error).message).toBe(`a ${activation} method may not use the ${resolver} resolver`);
}

describe("activation policy", () => {
  it("cold and explicit methods get only cold inspection; live-only cannot resume", async () => {
    const { policy } = await setup();
    for (const activation of ["cold", "explicit"] as const) {
      const scope = policy.scope(activation);
      forbiddenCall(() => scope.live(ADMIN, "a1"), activation, "live");
      forbiddenCall(() => scope.resume(ADMIN, "a1"), activation, "resume");
      forbiddenCall(() => scope.interaction(ADMIN, "i1", APPROVE), activation, "interaction");
      expect((await scope.inspect(ADMIN, "a1")).header.sessionId).toBe("a1");
    }
    const liveOnly = policy.scope("live-only");
    forbiddenCall(() => liveOnly.resume(ADMIN, "a1"), "live-only", "resume");
    expect(await codeOf(liveOnly.live(ADMIN, "a1"))).toBe("agent_not_live");
    expect(await codeOf(liveOnly.interaction(ADMIN, "nope", APPROVE))).toBe("interaction_not_found");
  });

  it("resume attaches a cold session with the owner and model of its header", async () => {
    const { policy, attached, live } = await setup();
    const session = await policy.scope("resume").resume(ALICE, "a1");
    expect(attached).toEqual([{ sessionId: "a1", info: { owner: "alice", model: "demo" } }]);
    expect(live.get("a1")).toBe(session);
    expect(await codeOf(policy.scope("resume").resume(BOB, "a1"))).toBe("session_not_found");
    expect(await codeOf(policy.scope("resume").resume(ALICE, "missing"))).toBe("session_not_found");
  });

  it("a live session is resolved without reading the store, and refused to another principal", async () => {
    const { policy, live, headers } = await setup();
    const running = { sessionId: "a1", owner: "alice", model: "demo" } as unknown as LiveSession;
    live.set("a1", running);
    headers.mockClear();
    expect(await policy.scope("resume").resume(ALICE, "a1")).toBe(running);
    expect(await policy.scope("resume").live(ALICE, "a1")).toBe(running);
    expect(headers).not.toHaveBeenCalled();
    expect(await codeOf(policy.scope("resume").resume(BOB, "a1"))).toBe("session_not_found");
    expect(await codeOf(policy.scope("resume").live(BOB, "a1"))).toBe("session_not_found");
    expect(headers).not.toHaveBeenCalled();
  });

  it("the live-only lookup of a cold session says agent_not_live only to a principal who may see it", async () => {
    const { policy, attached } = await setup();
    expect(await codeOf(policy.scope("live-only").live(ALICE, "a1"))).toBe("agent_not_live");
    expect(await codeOf(policy.scope("live-only").live(BOB, "a1"))).toBe("session_not_found");
    expect(await codeOf(policy.scope("live-only").live(ALICE, "missing"))).toBe("session_not_found");
    expect(attached).toEqual([]);
  });

  it("an interaction resolves to its session for a principal who may see it, and reads as missing to others", async () => {
    const { policy, store } = await setup();
    await store.append("a1", [
      { type: "turn/start", data: { turnId: "t1", trigger: "prompt" } },
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i1", kind: "approval", action: "x" },
      },
    ]);
    expect(await policy.scope("live-only").interaction(ALICE, "i1", APPROVE)).toEqual({
      interactionId: "i1",
      sessionId: "a1",
      repeat: false,
    });
    expect(await policy.scope("resume").interaction(ADMIN, "i1", APPROVE)).toEqual({
      interactionId: "i1",
      sessionId: "a1",
      repeat: false,
    });
    expect(await codeOf(policy.scope("resume").interaction(BOB, "i1", APPROVE))).toBe(
      "interaction_not_found",
    );
  });

  it("a resume call tells of the sessions it resolved only once it succeeded; a refused one tells nothing", async () => {
    const told: [string, string][] = [];
    const { policy } = await setup((principal, sessionId) => {
      told.push([principal.name, sessionId]);
    });
    const refused = policy.run("resume", async (resolvers) => {
      await resolvers.resume(ALICE, "a1");
      throw new SessionmuxError("queue_full", "full");
    });
    expect(await codeOf(refused)).toBe("queue_full");
    expect(told).toEqual([]);
    const answered = await policy.run("resume", async (resolvers) => {
      await resolvers.resume(ALICE, "a1");
      expect(told).toEqual([]);
      return "done";
    });
    expect(answered).toBe("done");
    expect(told).toEqual([["alice", "a1"]]);
    // a cold call resolves nothing for work
    await policy.run("cold", (resolvers) => resolvers.inspect(ALICE, "a1"));
    expect(told).toHaveLength(1);
  });

  it("a resume call answers only once its work notice is done, each session told once, and a failed notice fails it", async () => {
    const held = gate();
    const told: string[] = [];
    let fail = false;
    const { policy } = await setup(async (_principal, sessionId) => {
      told.push(sessionId);
      await held.promise;
      if (fail) throw new SessionmuxError("persistence_failure", "restore failed");
    });
    let answered = false;
    const call = policy
      .run("resume", async (resolvers) => {
        await resolvers.resume(ALICE, "a1");
        await resolvers.resume(ALICE, "a1");
        return "done";
      })
      .then((result) => {
        answered = true;
        return result;
      });
    await vi.waitUntil(() => told.length > 0);
    await new Promise((resolve) => setImmediate(resolve));
    expect(answered).toBe(false);
    held.open();
    expect(await call).toBe("done");
    expect(told).toEqual(["a1"]);
    fail = true;
    const failed = policy.run("resume", async (resolvers) => {
      await resolvers.resume(ALICE, "a1");
      return "done";
    });
    expect(await codeOf(failed)).toBe("persistence_failure");
  });

  it("an answer to an interaction answered otherwise or withdrawn is refused before anything resumes", async () => {
    const { policy, store, attached } = await setup();
    await store.append("a1", [
      { type: "turn/start", data: { turnId: "t1", trigger: "prompt" } },
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i1", kind: "approval", action: "x" },
      },
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i2", kind: "approval", action: "y" },
      },
    ]);
    await store.resolveInteraction("i1", APPROVE);
    const scope = policy.scope("resume");
    expect(await scope.interaction(ALICE, "i1", APPROVE)).toEqual({
      interactionId: "i1",
      sessionId: "a1",
      repeat: true,
    });
    expect(await codeOf(scope.interaction(ALICE, "i1", { outcome: "deny" }))).toBe(
      "interaction_already_resolved",
    );
    await store.append("a1", [{ type: "turn/end", data: { turnId: "t1", state: "cancelled" } }]);
    expect(await codeOf(scope.interaction(ALICE, "i2", APPROVE))).toBe("interaction_not_found");
    expect(attached).toEqual([]);
  });
});

describe("an agent attached for a refused resume call", () => {
  /** The policy over a real agent registry and a real SQLite store holding session `a1`. */
  async function withRegistry() {
    const dir = tempDir("sessionmux-activation-");
    const store = SqliteSessionStore.open(dir.file("s.db"));
    cleanups.push(() => dir.remove());
    cleanups.push(() => store.close());
    await store.create({ sessionId: "a1", owner: "alice", model: "demo" });
    const live = new LiveRegistry({ append: async () => undefined, progress: async () => undefined });
    const agents = new AgentRegistry({
      live,
      idleDetachMs: 600_000,
      maxLiveAgentsPerOwner: 10,
      logger: pino({ enabled: false }),
    });
    cleanups.push(() => agents.close());
    return { policy: new ActivationPolicy(store, agents), agents };
  }

  /** A resume call that resolves `a1`, waits for `until`, then is refused at its write. */
  const refusedCall = (policy: ActivationPolicy, until: Promise<void> = Promise.resolve()) =>
    policy.run("resume", async (resolvers) => {
      await resolvers.resume(ALICE, "a1");
      await until;
      throw new SessionmuxError("queue_full", "refused at the write");
    });

  it("goes again; one that was live before the call stays", async () => {
    const { policy, agents } = await withRegistry();
    expect(await codeOf(refusedCall(policy))).toBe("queue_full");
    expect(agents.get("a1")).toBeUndefined();
    const live = await policy.run("resume", (resolvers) => resolvers.resume(ALICE, "a1"));
    expect(await codeOf(refusedCall(policy))).toBe("queue_full");
    expect(agents.get("a1")).toBe(live);
  });

  it("stays while another call that resolved it is under way, and goes when that one is refused too", async () => {
    const { policy, agents } = await withRegistry();
    const later = gate();
    const first = refusedCall(policy);
    const second = refusedCall(policy, later.promise);
    expect(await codeOf(first)).toBe("queue_full");
    expect(agents.get("a1")).toBeDefined();
    later.open();
    expect(await codeOf(second)).toBe("queue_full");
    expect(agents.get("a1")).toBeUndefined();
  });

  it("stays once a call that resolved it succeeded", async () => {
    const { policy, agents } = await withRegistry();
    const later = gate();
    const refused = refusedCall(policy, later.promise);
    const answered = policy.run("resume", async (resolvers) => {
      await resolvers.resume(ALICE, "a1");
      return "answered";
    });
    expect(await answered).toBe("answered");
    later.open();
    expect(await codeOf(refused)).toBe("queue_full");
    expect(agents.get("a1")).toBeDefined();
  });
});
