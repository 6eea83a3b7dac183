import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { describe, expect, it, vi } from "vitest";
import type { NewEvent, SessionEvent } from "../../protocol/index.js";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import { AgentRegistry } from "../../src/host/agent-registry.js";
import { HostCluster } from "../../src/host/host-cluster.js";
import { LiveRegistry } from "../../src/host/live/live-registry.js";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import type { LiveStateNotice } from "../../src/store/live-state-store.js";
import type { SessionLease, SessionLeaseStore } from "../../src/store/session-lease.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { gate } from "../support/gate.js";
import { capturedLogger } from "../support/log-capture.js";
import { tempDir } from "../support/temp-dir.js";
import { withMembers } from "../support/with-members.js";
import { errorCode, readLog } from "./host-fixture.js";
import { ScriptedInbox } from "./scripted-inbox.js";

/**
 * One host's part in a cluster, on a real SQLite store that other hosts are simulated on: what
 * host B does is a write to the same store under B's host id (take, release or let expire a
 * lease, append, queue a prompt), as B's own store would make it on a shared database. The
 * inbox between hosts is scripted (see `ScriptedInbox`).
 */

const HOST = "host-a";
const OTHER = "host-b";

interface Options {
  leaseTtlMs?: number;
  logger?: Logger;
  maxLiveAgentsPerPrincipal?: number;
  forwardTimeoutMs?: number;
  idleDetachMs?: number;
  /** The leases the cluster uses (the store by default). */
  leases?: SessionLeaseStore;
  /** Each live notice on its way to the host: `deliver` it now, later (late) or never (missed). */
  intercept?: (notice: LiveStateNotice, deliver: () => void) => void;
  /** The host's reads of the lease table, page by page (the store's by default). */
  leasePage?: SqliteSessionStore["leasePage"];
  /** The host's reads of the live state it restores at start (the store's by default). */
  liveStatePage?: SqliteSessionStore["liveStatePage"];
}

const disposers = cleanupsAfterEach();

/** The shared store, with sessions and other hosts' leases set up before host A starts. */
async function sharedStore() {
  const dir = tempDir();
  const store = SqliteSessionStore.open(dir.file("sessions.db"));
  disposers.push(async () => {
    await store.close();
    dir.remove();
  });
  const create = (sessionId: string) => store.create({ sessionId, owner: "alice", model: "demo" });
  const take = async (sessionId: string, hostId = OTHER, ttlMs = 60_000): Promise<SessionLease> => {
    const taken = await store.acquireLease(sessionId, hostId, ttlMs);
    if (taken.status !== "acquired") throw new Error(`lease: ${taken.status}`);
    return taken.lease;
  };
  /** A session another host holds (see `take`) with one durable queued prompt: its lease and the queueing's outcome. */
  const heldWithQueuedPrompt = async (sessionId: string, hostId = OTHER, ttlMs = 60_000) => {
    await create(sessionId);
    const lease = await take(sessionId, hostId, ttlMs);
    const queued = await store.enqueuePrompt({
      sessionId,
      itemId: "q1",
      queuedAt: Date.now(),
      input: { text: "still wanted", clientMessageId: `m-${sessionId}` },
    });
    return { lease, queued };
  };
  return { store, create, take, heldWithQueuedPrompt };
}

async function startHost(store: SqliteSessionStore, options: Options = {}) {
  const inbox = new ScriptedInbox();
  const { intercept, leasePage, liveStatePage } = options;
  // the host hears the store's live notices, and reads its leases, as the test lets it
  const heard = withMembers(store, {
    ...(intercept
      ? {
          subscribeLive: (listener: (notice: LiveStateNotice) => void) =>
            store.subscribeLive((notice) => intercept(notice, () => listener(notice))),
        }
      : {}),
    ...(leasePage ? { leasePage } : {}),
    ...(liveStatePage ? { liveStatePage } : {}),
  });
  const host = new SessionHost({
    store: heard,
    agent: new DemoAgent(),
    hostId: HOST,
    ...(options.idleDetachMs ? { idleDetachMs: options.idleDetachMs } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.maxLiveAgentsPerPrincipal !== undefined
      ? { maxLiveAgentsPerPrincipal: options.maxLiveAgentsPerPrincipal }
      : {}),
    cluster: {
      inbox,
      ...(options.leases ? { leases: options.leases } : {}),
      ...(options.leaseTtlMs ? { leaseTtlMs: options.leaseTtlMs } : {}),
      ...(options.forwardTimeoutMs ? { forwardTimeoutMs: options.forwardTimeoutMs } : {}),
    },
  });
  await host.start();
  let down = false;
  const shutdown = async () => {
    if (down) return;
    down = true;
    await host.shutdown();
  };
  disposers.push(shutdown);
  const shown = () =>
    Object.fromEntries(
      host.live.agents().map((agent) => [agent.sessionId, `${agent.state}@${agent.hostId}`]),
    );
  return { host, inbox, shown, shutdown };
}

const types = (events: readonly SessionEvent[]) => events.map((event) => event.type);

describe("a host in a cluster", () => {
  it("shows the agents other hosts run from their leases at start, past one page of leases; not its own", async () => {
    const shared = await sharedStore();
    const expected: Record<string, string> = {};
    for (let i = 0; i < 205; i++) {
      const sessionId = `s${String(i).padStart(3, "0")}`;
      const hostId = i % 2 === 0 ? OTHER : "host-c";
      await shared.create(sessionId);
      await shared.take(sessionId, hostId);
      expected[sessionId] = `attached@${hostId}`;
    }
    // a lease this host held before it restarted: no agent runs it anywhere now
    await shared.create("mine");
    await shared.take("mine", HOST);
    const a = await startHost(shared.store);
    expect(a.shown()).toEqual(expected);
  });

  it("after each lease round the view follows the leases, also when their notices were missed", async () => {
    const shared = await sharedStore();
    for (const id of ["ends", "moves", "stays"]) await shared.create(id);
    await shared.create("comes");
    const ends = await shared.take("ends");
    const moves = await shared.take("moves");
    await shared.take("stays");
    const a = await startHost(shared.store, {
      leaseTtlMs: 300,
      intercept: (notice, deliver) => {
        if (notice.kind !== "lease") deliver();
      },
    });
    expect(a.shown()).toEqual({
      ends: `attached@${OTHER}`,
      moves: `attached@${OTHER}`,
      stays: `attached@${OTHER}`,
    });
    await shared.store.releaseLease(ends);
    await shared.store.releaseLease(moves);
    await shared.take("moves", "host-c");
    await shared.take("comes", "host-c");
    await vi.waitFor(
      () =>
        expect(a.shown()).toEqual({
          moves: "attached@host-c",
          stays: `attached@${OTHER}`,
          comes: "attached@host-c",
        }),
      { timeout: 5_000 },
    );
  });

  it("a lease round whose read is older than a notice does not undo the move the notice made", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    const theirs = await shared.take("s1");
    let holdNext = false;
    const reading = gate();
    const held = gate();
    const a = await startHost(shared.store, {
      leaseTtlMs: 300,
      leasePage: async (after, limit) => {
        const page = await shared.store.leasePage(after, limit);
        if (holdNext) {
          holdNext = false;
          reading.open();
          await held.promise;
        }
        return page;
      },
    });
    expect(a.shown()).toEqual({ s1: `attached@${OTHER}` });
    holdNext = true;
    // a round read the lease table (s1 on host B) and waits before it applies what it read
    await reading.promise;
    await shared.store.releaseLease(theirs);
    await shared.take("s1", "host-c");
    expect(a.shown()).toEqual({ s1: "attached@host-c" });
    const deltas: string[] = [];
    a.host.live.subscribe((delta) => {
      if (delta.kind === "agent") deltas.push(`${delta.state}@${delta.hostId ?? ""}`);
    });
    held.open();
    // that round ends, and the next ones read the table as it is now
    await sleep(350);
    expect(deltas).toEqual([]);
    expect(a.shown()).toEqual({ s1: "attached@host-c" });
  });

  it("commits another host makes move its agent's status here; other changes to its session do not", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    const lease = await shared.take("s1");
    const a = await startHost(shared.store);
    const fence = { fence: lease };
    await shared.store.append(
      "s1",
      [{ type: "turn/start", data: { turnId: "t1", trigger: "prompt" } }],
      fence,
    );
    expect(a.shown()).toEqual({ s1: `running@${OTHER}` });
    await a.host.call(ADMIN, "session.rename", { sessionId: "s1", title: "renamed here" });
    expect(a.shown()).toEqual({ s1: `running@${OTHER}` });
    await shared.store.append(
      "s1",
      [{ type: "turn/end", data: { turnId: "t1", state: "completed" } }],
      fence,
    );
    expect(a.shown()).toEqual({ s1: `idle@${OTHER}` });
    await a.host.call(ADMIN, "session.clear", { sessionId: "s1" });
    expect(a.shown()).toEqual({ s1: `idle@${OTHER}` });
  });

  it("another host's jobs are in view here: running ones from the store at start, then started, progress, ended; twenty finished kept", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    const fence = { fence: await shared.take("s1") };
    const started = (jobId: string): NewEvent => ({
      type: "job/started",
      data: { jobId, label: `job ${jobId}`, turnId: "t1" },
    });
    const ended = (jobId: string, state: "completed" | "cancelled"): NewEvent => ({
      type: "job/ended",
      data: { jobId, state },
    });
    await shared.store.append(
      "s1",
      [{ type: "turn/start", data: { turnId: "t1", trigger: "prompt" } }, started("j0")],
      fence,
    );
    await shared.store.setJobProgress("j0", 0.25);
    await shared.create("s2");
    const fence2 = { fence: await shared.take("s2") };
    const a = await startHost(shared.store);
    const job = (jobId: string, state: string, progress = 0) => ({
      jobId,
      label: `job ${jobId}`,
      progress,
      state,
    });
    expect(a.host.live.jobs("s1")).toEqual([job("j0", "running", 0.25)]);
    expect(a.host.live.jobs("s2")).toEqual([]);
    await shared.store.append("s2", [started("x1")], fence2);
    expect(a.host.live.jobs("s2")).toEqual([job("x1", "running")]);
    const deltas: unknown[] = [];
    a.host.live.subscribe((delta) => {
      if (delta.kind === "jobs")
        deltas.push(delta.jobs.map((j) => `${j.jobId}:${j.state}:${j.progress}`).join(" "));
    });
    await shared.store.setJobProgress("j0", 0.5);
    await shared.store.append("s1", [started("j1")], fence);
    await shared.store.append("s1", [ended("j1", "completed")], fence);
    expect(deltas).toEqual([
      "j0:running:0.5",
      "j0:running:0.5 j1:running:0",
      "j0:running:0.5 j1:completed:0",
    ]);
    for (let i = 2; i <= 21; i++)
      await shared.store.append("s1", [started(`j${i}`), ended(`j${i}`, "completed")], fence);
    // a running job is never dropped for finished ones
    expect(a.host.live.jobs("s1").map((j) => j.jobId)).toEqual([
      "j0",
      ...Array.from({ length: 20 }, (_, i) => `j${i + 2}`),
    ]);
    await shared.store.append("s1", [ended("j0", "cancelled")], fence);
    const kept = a.host.live.jobs("s1");
    expect(kept.map((j) => j.jobId)).toEqual(Array.from({ length: 20 }, (_, i) => `j${i + 2}`));
    expect(new Set(kept.map((j) => j.state))).toEqual(new Set(["completed"]));
    expect(a.host.live.allJobs()).toEqual([
      { sessionId: "s1", jobs: kept },
      { sessionId: "s2", jobs: [job("x1", "running")] },
    ]);
  });

  it("an agent moving between hosts is told as one agent delta each move, with no empty job list and no detached between", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    const a = await startHost(shared.store);
    const deltas: string[] = [];
    a.host.live.subscribe((delta) => {
      if (delta.kind === "agent") deltas.push(`${delta.state}@${delta.hostId ?? ""}`);
      if (delta.kind === "jobs") deltas.push(`jobs ${delta.jobs.length}`);
    });
    await shared.take("s1", OTHER, 100);
    expect(deltas).toEqual([`attached@${OTHER}`]);
    // host B stops renewing; its lease runs out with no notice, and this host takes the session over
    await sleep(150);
    await a.host.call(ADMIN, "session.prompt", { sessionId: "s1", text: "hello", clientMessageId: "m1" });
    await vi.waitFor(() => expect(deltas.at(-1)).toBe(`idle@${HOST}`));
    expect(deltas.slice(0, 2)).toEqual([`attached@${OTHER}`, `attached@${HOST}`]);
    expect(deltas.filter((delta) => delta.startsWith("detached") || delta.startsWith("jobs"))).toEqual([]);
  });

  it("another host taking a session this host runs stops its agent at once: the turn writes nothing more", async () => {
    const shared = await sharedStore();
    const a = await startHost(shared.store);
    await a.host.call(ADMIN, "session.create", { sessionId: "s1" });
    await a.host.call(ADMIN, "session.prompt", {
      sessionId: "s1",
      text: "/stream 1000 10",
      clientMessageId: "m1",
    });
    await vi.waitFor(async () => expect((await readLog(shared.store, "s1")).length).toBeGreaterThan(4));
    const held = a.host.leases!.lease("s1")!;
    // the store lets B take it (A's lease lapsed, as if A had paused): B's notice is the first A hears of it
    await shared.store.releaseLease(held);
    expect(a.host.leases!.lease("s1")).toEqual(held);
    await shared.take("s1");
    expect(a.host.leases!.lease("s1")).toBeUndefined();
    expect(a.shown()).toEqual({ s1: `attached@${OTHER}` });
    const after = (await readLog(shared.store, "s1")).length;
    await sleep(100);
    const log = await readLog(shared.store, "s1");
    expect(log.length).toBe(after);
    expect(types(log)).not.toContain("turn/end");
  });

  it("a late notice of another host's older lease, or of this host's own take, leaves this host's lease alone", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    const late: (() => void)[] = [];
    const a = await startHost(shared.store, {
      intercept: (notice, deliver) => {
        if (notice.kind === "lease" && notice.hostId === OTHER) late.push(deliver);
        else deliver();
      },
    });
    const theirs = await shared.take("s1");
    await shared.store.releaseLease(theirs);
    await a.host.call(ADMIN, "session.prompt", { sessionId: "s1", text: "hello", clientMessageId: "m1" });
    const held = a.host.leases!.lease("s1")!;
    expect(held.generation).toBeGreaterThan(theirs.generation);
    expect(late).toHaveLength(1);
    for (const deliver of late) deliver();
    expect(a.host.leases!.lease("s1")).toEqual(held);
    await vi.waitFor(async () => {
      expect(a.shown()).toEqual({ s1: `idle@${HOST}` });
      expect(types(await readLog(shared.store, "s1"))).toContain("turn/end");
    });
    // a take of this host's own, announced to every host (here: after its row was let go)
    await shared.store.releaseLease(held);
    await shared.take("s1", HOST);
    expect(a.host.leases!.lease("s1")).toEqual(held);
    expect(a.shown()).toEqual({ s1: `idle@${HOST}` });
  });

  it("queued prompts nobody runs (their host died) are taken over at the next lease round and run here", async () => {
    const shared = await sharedStore();
    const { queued } = await shared.heldWithQueuedPrompt("orphan", OTHER, 50);
    expect(queued.status).toBe("queued");
    await startHost(shared.store, { leaseTtlMs: 300 });
    await vi.waitFor(
      async () => {
        const log = await readLog(shared.store, "orphan");
        expect(types(log)).toEqual(expect.arrayContaining(["user/message", "turn/end"]));
      },
      { timeout: 5_000 },
    );
    const holder = await shared.store.leaseHolder("orphan");
    expect(holder?.hostId).toBe(HOST);
  });

  it("queued prompts another live host owns are neither restored nor warned of at start; once its lease is gone they are taken over, and said so", async () => {
    const shared = await sharedStore();
    const { lease: theirs } = await shared.heldWithQueuedPrompt("orphan");
    const { logger, lines } = capturedLogger();
    await startHost(shared.store, { leaseTtlMs: 300, logger });
    const restoring = (line: Record<string, unknown>) =>
      line.msg === "restored queued prompts" || line.msg === "queued prompts not restored";
    expect(lines.filter(restoring)).toEqual([]);
    await shared.store.releaseLease(theirs);
    await vi.waitFor(async () => expect(types(await readLog(shared.store, "orphan"))).toContain("turn/end"), {
      timeout: 5_000,
    });
    expect(lines.filter((line) => line.msg === "took over queued prompts whose owner is gone")).toEqual([
      expect.objectContaining({ level: 30, sessionId: "orphan", hostId: HOST }),
    ]);
    expect(lines.filter(restoring)).toEqual([]);
  });

  it("queued prompts nobody runs that this host may not take (its agent limit) are tried every round, logged at debug only", async () => {
    const shared = await sharedStore();
    const { lease: theirs } = await shared.heldWithQueuedPrompt("orphan");
    const { logger, lines } = capturedLogger();
    const a = await startHost(shared.store, { leaseTtlMs: 300, logger, maxLiveAgentsPerPrincipal: 1 });
    // alice's one agent is at work here when her other session's lease goes
    const alice = { name: "alice", admin: false };
    await a.host.call(alice, "session.create", { sessionId: "busy" });
    await a.host.call(alice, "session.prompt", {
      sessionId: "busy",
      text: "/sleep 60000",
      clientMessageId: "m1",
    });
    await shared.store.releaseLease(theirs);
    const refused = () => lines.filter((line) => line.msg === "queued prompts not restored");
    await vi.waitFor(() => expect(refused().length).toBeGreaterThanOrEqual(2), { timeout: 5_000 });
    await a.shutdown();
    expect(refused().every((line) => line.level === 20 && line.sessionId === "orphan")).toBe(true);
    expect(lines.filter((line) => (line.level as number) >= 40)).toEqual([]);
    expect(lines.filter((line) => line.msg === "took over queued prompts whose owner is gone")).toEqual([]);
    expect((await shared.store.queue("orphan")).map((item) => item.itemId)).toEqual(["q1"]);
  });

  it("a session the sweep read as unowned whose agent attached here since is left to that agent", async () => {
    const shared = await sharedStore();
    let listed: string[] = [];
    let sweeps = 0;
    const { logger, lines } = capturedLogger();
    const a = await startHost(shared.store, {
      leaseTtlMs: 300,
      logger,
      // the sweep's read, made before this host took the session
      leases: withMembers(shared.store, {
        unownedQueues: async () => {
          sweeps++;
          return listed;
        },
      }),
    });
    await a.host.call(ADMIN, "session.create", { sessionId: "s1" });
    await a.host.call(ADMIN, "session.prompt", {
      sessionId: "s1",
      text: "/sleep 60000",
      clientMessageId: "m1",
    });
    await a.host.call(ADMIN, "session.prompt", { sessionId: "s1", text: "next", clientMessageId: "m2" });
    listed = ["s1"];
    const from = sweeps;
    await vi.waitFor(() => expect(sweeps).toBeGreaterThanOrEqual(from + 2), { timeout: 5_000 });
    expect(lines.filter((line) => line.msg === "took over queued prompts whose owner is gone")).toEqual([]);
    expect(types(await readLog(shared.store, "s1")).filter((type) => type === "turn/start")).toHaveLength(1);
  });

  it("an open turn whose lease this host held before it restarted is closed at start; one another live host holds is left open", async () => {
    const shared = await sharedStore();
    for (const sessionId of ["mine", "theirs"]) {
      await shared.create(sessionId);
      await shared.take(sessionId, sessionId === "mine" ? HOST : OTHER);
      await shared.store.append(sessionId, [
        { type: "turn/start", data: { turnId: `t-${sessionId}`, trigger: "prompt" } },
      ]);
    }
    await startHost(shared.store);
    expect((await readLog(shared.store, "mine")).at(-1)).toMatchObject({
      type: "turn/end",
      data: { turnId: "t-mine", state: "interrupted" },
    });
    expect(types(await readLog(shared.store, "theirs"))).toEqual(["session/created", "turn/start"]);
  });

  it("a session with no queued prompt whose lease ends as this host restores is not taken", async () => {
    const shared = await sharedStore();
    await shared.create("jobs");
    const theirs = await shared.take("jobs");
    // another host's running job: the session's only live state
    await shared.store.append(
      "jobs",
      [
        { type: "turn/start", data: { turnId: "t1", trigger: "prompt" } },
        { type: "job/started", data: { jobId: "j1", label: "theirs", turnId: "t1" } },
      ],
      { fence: theirs },
    );
    const a = await startHost(shared.store, {
      // the lease lapses after the open turns were closed at start, before the restore reads it
      liveStatePage: async (after, limit) => {
        const page = await shared.store.liveStatePage(after, limit);
        await shared.store.releaseLease(theirs);
        return page;
      },
    });
    expect(a.host.leases!.lease("jobs")).toBeUndefined();
    expect(await shared.store.leaseHolder("jobs")).toBeNull();
    expect(a.host.live.agents().filter((agent) => agent.hostId === HOST)).toEqual([]);
  });

  it("a job event refused because another host took the session tells this host at once that it lost it", async () => {
    const shared = await sharedStore();
    // this host hears nothing of the other host's take: only the refused write can tell it
    const a = await startHost(shared.store, {
      // no renewal round comes before the job ends
      leaseTtlMs: 60_000,
      intercept: (notice, deliver) => {
        if (!(notice.kind === "lease" && notice.hostId === OTHER)) deliver();
      },
    });
    await a.host.call(ADMIN, "session.create", { sessionId: "busy" });
    await a.host.call(ADMIN, "session.prompt", {
      sessionId: "busy",
      text: "/job 1",
      clientMessageId: "m1",
    });
    await vi.waitFor(() => {
      expect(a.shown()).toEqual({ busy: `idle@${HOST}` });
      expect(a.host.live.jobs("busy")).toMatchObject([{ state: "running" }]);
    });
    await shared.store.releaseLease(a.host.leases!.lease("busy")!);
    await shared.take("busy");
    expect(a.host.leases!.lease("busy")).toBeDefined();
    // the job's end is its next event: refused, and the agent here stops
    await vi.waitFor(() => expect(a.host.leases!.lease("busy")).toBeUndefined(), { timeout: 5_000 });
    expect(a.shown()).toEqual({});
    expect(types(await readLog(shared.store, "busy"))).not.toContain("job/ended");
  });

  it("an agent detached for idleness gives its lease up, so another host may take the session at once", async () => {
    const shared = await sharedStore();
    const a = await startHost(shared.store, { idleDetachMs: 50 });
    await a.host.call(ADMIN, "session.create", { sessionId: "s1" });
    await a.host.call(ADMIN, "session.prompt", { sessionId: "s1", text: "hello", clientMessageId: "m1" });
    expect((await shared.store.leaseHolder("s1"))?.hostId).toBe(HOST);
    await vi.waitFor(async () => expect(await shared.store.leaseHolder("s1")).toBeNull(), { timeout: 5_000 });
    expect(a.host.leases!.lease("s1")).toBeUndefined();
    expect((await shared.store.acquireLease("s1", OTHER, 60_000)).status).toBe("acquired");
  });

  it("takes leases for the time it was configured with, and forwards with its own timeout", async () => {
    const shared = await sharedStore();
    await shared.create("theirs");
    await shared.take("theirs");
    const a = await startHost(shared.store, { leaseTtlMs: 45_000, forwardTimeoutMs: 1_500 });
    await a.host.call(ADMIN, "session.create", { sessionId: "mine" });
    const before = Date.now();
    await a.host.call(ADMIN, "session.prompt", { sessionId: "mine", text: "hello", clientMessageId: "m1" });
    const holder = await shared.store.leaseHolder("mine");
    expect(holder!.expiresAt - before).toBeGreaterThan(40_000);
    expect(holder!.expiresAt - Date.now()).toBeLessThanOrEqual(45_000);
    a.inbox.answers = [{ status: "ok", result: { turnId: "t-there" } }];
    await a.host.call(ADMIN, "session.cancel", { sessionId: "theirs" });
    expect(a.inbox.sent.map((sent) => [sent.target, sent.timeoutMs])).toEqual([[OTHER, 1_500]]);
  });

  it("serves calls forwarded to it once started, through its router, and stops serving them at shutdown", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    const a = await startHost(shared.store);
    expect(a.inbox.served.map(({ hostId, stopped }) => ({ hostId, stopped }))).toEqual([
      { hostId: HOST, stopped: false },
    ]);
    const served = a.inbox.served[0]!;
    const call = {
      callId: "c1",
      fromHost: OTHER,
      sessionId: "s1",
      principal: { name: "admin", admin: true },
      method: "session.prompt",
      params: { sessionId: "s1", text: "from b", clientMessageId: "m-b" },
    };
    // not this host's session yet
    expect(await served.handler(call)).toEqual({ status: "not_owner" });
    await a.host.call(ADMIN, "session.prompt", { sessionId: "s1", text: "hello", clientMessageId: "m1" });
    expect(await served.handler(call)).toMatchObject({ status: "ok" });
    await a.shutdown();
    expect(served.stopped).toBe(true);
    expect(await shared.store.leaseHolder("s1")).toBeNull();
  });

  it("a session another host took between this host's look and its take is forwarded to that host", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    let stale = true;
    // the router's look at the lease, answered as it was just before host B took it
    const leases = withMembers<SessionLeaseStore>(shared.store, {
      acquireLease: (...args) => shared.store.acquireLease(...args),
      leaseHolder: async (sessionId) => {
        if (!stale) return shared.store.leaseHolder(sessionId);
        stale = false;
        await shared.take(sessionId);
        return null;
      },
    });
    const a = await startHost(shared.store, { leases });
    a.inbox.answers = [{ status: "ok", result: { turnId: "t-there" } }];
    const prompt = { sessionId: "s1", text: "hello", clientMessageId: "m1" };
    expect(await a.host.call(ADMIN, "session.prompt", prompt)).toEqual({ turnId: "t-there" });
    expect(a.inbox.sent.map((sent) => [sent.target, sent.call.method])).toEqual([[OTHER, "session.prompt"]]);
    expect(types(await readLog(shared.store, "s1"))).not.toContain("user/message");
    expect(a.host.leases!.lease("s1")).toBeUndefined();
  });

  it("a session deleted while this host took its lease is refused as retired, and no agent starts", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    const leases = withMembers<SessionLeaseStore>(shared.store, {
      acquireLease: async (...args) => {
        await shared.store.delete("s1");
        return shared.store.acquireLease(...args);
      },
    });
    const a = await startHost(shared.store, { leases });
    const prompt = { sessionId: "s1", text: "hello", clientMessageId: "m1" };
    expect((await errorCode(() => a.host.call(ADMIN, "session.prompt", prompt))).code).toBe(
      "session_retired",
    );
    expect(a.shown()).toEqual({});
    expect(a.inbox.sent).toEqual([]);
  });

  it("idle agents whose leases another host took are detached here, a running job's included; they write nothing more", async () => {
    const shared = await sharedStore();
    const a = await startHost(shared.store);
    await a.host.call(ADMIN, "session.create", { sessionId: "idle" });
    await a.host.call(ADMIN, "session.create", { sessionId: "busy" });
    await a.host.call(ADMIN, "session.prompt", { sessionId: "idle", text: "hello", clientMessageId: "m1" });
    await a.host.call(ADMIN, "session.prompt", { sessionId: "busy", text: "/job 30", clientMessageId: "m2" });
    await vi.waitFor(() => {
      expect(a.shown()).toEqual({ idle: `idle@${HOST}`, busy: `idle@${HOST}` });
      expect(a.host.live.jobs("busy")).toHaveLength(1);
    });
    const before = (await readLog(shared.store, "busy")).length;
    for (const id of ["idle", "busy"]) {
      await shared.store.releaseLease(a.host.leases!.lease(id)!);
      await shared.take(id);
    }
    expect(a.shown()).toEqual({ idle: `attached@${OTHER}`, busy: `attached@${OTHER}` });
    expect(a.host.live.jobs("busy")).toEqual([]);
    await sleep(50);
    expect(await readLog(shared.store, "busy")).toHaveLength(before);
  });

  it("a lease lost for a session whose agent is not here changes nothing else", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    const a = await startHost(shared.store);
    expect((await a.host.leases!.acquire("s1")).status).toBe("acquired");
    await shared.store.releaseLease(a.host.leases!.lease("s1")!);
    await shared.take("s1");
    expect(a.host.leases!.lease("s1")).toBeUndefined();
    expect(a.shown()).toEqual({ s1: `attached@${OTHER}` });
  });

  it("a lease lost tells the call inbox, so the calls of the session forwarded here and waiting their turn are routed again", async () => {
    const shared = await sharedStore();
    await shared.create("s1");
    const a = await startHost(shared.store);
    expect((await a.host.leases!.acquire("s1")).status).toBe("acquired");
    await shared.store.releaseLease(a.host.leases!.lease("s1")!);
    expect(a.inbox.lost).toEqual([]);
    await shared.take("s1");
    expect(a.host.leases!.lease("s1")).toBeUndefined();
    expect(a.inbox.lost).toEqual([{ hostId: HOST, sessionId: "s1" }]);
  });

  it("a host that never started, or whose start failed, shuts down cleanly", async () => {
    const shared = await sharedStore();
    const never = new SessionHost({
      store: shared.store,
      agent: new DemoAgent(),
      hostId: HOST,
      cluster: { inbox: new ScriptedInbox() },
    });
    await never.shutdown();
    const failing = new SessionHost({
      store: withMembers(shared.store, {
        leasePage: async () => Promise.reject(new Error("the database went away")),
      }),
      agent: new DemoAgent(),
      hostId: HOST,
      cluster: { inbox: new ScriptedInbox() },
    });
    await expect(failing.start()).rejects.toThrow("the database went away");
    await failing.shutdown();
  });
});

/**
 * A host's cluster part alone, with its real agent and live registries: a claim of a session,
 * its take of the lease held at the store until the test lets it go on, and an earlier agent's
 * detach of the same session arriving meanwhile.
 */
async function claimingHost(options: { maxLiveAgentsPerOwner?: number; holdFrom?: number } = {}) {
  const shared = await sharedStore();
  await shared.create("s1");
  const { logger } = capturedLogger();
  const taking = gate();
  const taken = gate();
  let takes = 0;
  const leases = withMembers<SessionLeaseStore>(shared.store, {
    acquireLease: async (...args) => {
      if (++takes >= (options.holdFrom ?? 1)) {
        taken.open();
        await taking.promise;
      }
      return shared.store.acquireLease(...args);
    },
  });
  // no job runs here: nothing is recorded
  const live = new LiveRegistry({ append: async () => undefined, progress: async () => undefined }, HOST);
  const agents = new AgentRegistry({
    live,
    idleDetachMs: 600_000,
    maxLiveAgentsPerOwner: options.maxLiveAgentsPerOwner ?? 10,
    logger,
  });
  const cluster = new HostCluster({
    options: { inbox: new ScriptedInbox(), leases },
    hostId: HOST,
    store: shared.store,
    logger,
    agents: () => agents,
    registry: () => live,
    run: async () => undefined,
    resumeUnowned: async () => undefined,
    closeAbandoned: async () => undefined,
    closing: () => false,
  });
  disposers.push(async () => {
    taking.open();
    agents.close();
  });
  const attach = () => agents.attach("s1", { owner: "alice", model: "demo" });
  /**
   * An earlier agent's detach arrives while the claim's take is held; the take then goes on:
   * the claim's agent is attached and this host still holds the lease, here and in the store.
   */
  const detachDuringTake = async (claimed: Promise<unknown>) => {
    await taken.promise;
    cluster.detached("s1");
    await sleep(20);
    taking.open();
    const session = await claimed;
    // every release there was to run has run
    await sleep(50);
    expect(agents.get("s1")).toBe(session);
    expect(cluster.leases.lease("s1")?.hostId).toBe(HOST);
    expect((await shared.store.leaseHolder("s1"))?.hostId).toBe(HOST);
  };
  return { shared, cluster, agents, taking, attach, detachDuringTake };
}

describe("claiming a session on a host in a cluster", () => {
  it("an earlier agent's detach arriving while the lease is taken does not give up the lease of the agent attaching", async () => {
    const { cluster, attach, detachDuringTake } = await claimingHost();
    await detachDuringTake(cluster.claim("s1", attach));
  });

  it("of two claims at once, the one still taking the lease keeps it from a detach after the other's agent went", async () => {
    const { cluster, agents, attach, detachDuringTake } = await claimingHost({ holdFrom: 2 });
    const first = cluster.claim("s1", attach);
    const second = cluster.claim("s1", attach);
    await first;
    agents.detach("s1");
    await detachDuringTake(second);
  });

  it("a detach arriving once the agent attached keeps the lease; once the agent is gone it goes", async () => {
    const { shared, cluster, agents, taking, attach } = await claimingHost();
    taking.open();
    await cluster.claim("s1", attach);
    cluster.detached("s1");
    await sleep(50);
    expect((await shared.store.leaseHolder("s1"))?.hostId).toBe(HOST);
    agents.detach("s1");
    cluster.detached("s1");
    await vi.waitFor(async () => expect(await shared.store.leaseHolder("s1")).toBeNull(), { timeout: 5_000 });
    expect(cluster.leases.lease("s1")).toBeUndefined();
  });

  it("a claim whose agent cannot attach gives the lease it took up, and fails with the attach's error", async () => {
    const { shared, cluster, agents, taking } = await claimingHost();
    taking.open();
    const refused = new Error("no room for another agent");
    await expect(
      cluster.claim("s1", () => {
        throw refused;
      }),
    ).rejects.toBe(refused);
    expect(agents.get("s1")).toBeUndefined();
    await vi.waitFor(async () => expect(await shared.store.leaseHolder("s1")).toBeNull(), { timeout: 5_000 });
    expect(cluster.leases.lease("s1")).toBeUndefined();
  });
});
