import fs from "node:fs";
import { describe, expect, test, vi } from "vitest";
import type { CallMethod, Notification } from "../../protocol/index.js";
import { Limits } from "../../protocol/limits.js";
import type { AgentDriver } from "../../src/agents/agent.js";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import { ADMIN, type Principal } from "../../src/host/principal.js";
import { SessionHost, type SessionHostOptions } from "../../src/host/session-host.js";
import { SessionReadHandle } from "../../src/host/session-read-handle.js";
import type { AttachmentBody } from "../../src/store/session-store.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { tempDir } from "../support/temp-dir.js";
import { errorCode, readLog, turnEvents } from "./host-fixture.js";

/** The session host itself, on a real SQLite file: what the transports use beside `call`, its start and its shutdown. */

const ALICE: Principal = { name: "alice", admin: false };
const BOB: Principal = { name: "bob", admin: false };

const disposers = cleanupsAfterEach();

async function open(options: Partial<SessionHostOptions> = {}) {
  const dir = tempDir();
  const store = SqliteSessionStore.open(dir.file("sessions.db"));
  const host = new SessionHost({ store, agent: new DemoAgent(), ...options });
  await host.start();
  disposers.push(async () => {
    await host.shutdown();
    await store.close();
    dir.remove();
  });
  return { host, store };
}

async function bytesOf(body: AttachmentBody): Promise<number[]> {
  const out: number[] = [];
  for await (const chunk of body.chunks()) out.push(...chunk);
  return out;
}

describe("call", () => {
  test("refuses a stream method and a name that is no method unknown_method, naming it", async () => {
    const { host } = await open();
    for (const method of ["session.follow", "session.control", "session.nope"]) {
      const refused = host.call(ADMIN, method as CallMethod, {} as never);
      await expect(refused).rejects.toMatchObject({
        code: "unknown_method",
        message: `unknown method ${method}`,
      });
    }
  });

  test("bad params and a host shutting down are refused as rejected promises, never thrown", async () => {
    const { host } = await open();
    const bad = host.call(ALICE, "session.rename", { sessionId: "mine", title: "t", extra: 1 } as never);
    await expect(bad).rejects.toMatchObject({ code: "bad_request" });
    await host.shutdown();
    const refused = host.call(ALICE, "session.rename", { sessionId: "mine", title: "t" });
    await expect(refused).rejects.toMatchObject({ code: "host_shutting_down" });
  });
});

describe("attachments", () => {
  test("openAttachment streams one the principal may read; another's, or one in another's session, is not found", async () => {
    const { host } = await open();
    await host.call(ALICE, "session.create", { sessionId: "mine" });
    const attachmentId = await host.putAttachment(ALICE, {
      name: "a.bin",
      type: "application/octet-stream",
      bytes: new Uint8Array([7, 8, 9]),
    });
    const body = await host.openAttachment(ALICE, "session.attachment", { sessionId: "mine", attachmentId });
    expect(body).toMatchObject({ name: "a.bin", type: "application/octet-stream", size: 3, owner: "alice" });
    expect(await bytesOf(body)).toEqual([7, 8, 9]);
    expect(
      await bytesOf(
        await host.openAttachment(ADMIN, "session.attachment", { sessionId: "mine", attachmentId }),
      ),
    ).toEqual([7, 8, 9]);
    await host.call(BOB, "session.create", { sessionId: "his" });
    expect(
      (
        await errorCode(() =>
          host.openAttachment(BOB, "session.attachment", { sessionId: "his", attachmentId }),
        )
      ).code,
    ).toBe("attachment_not_found");
    expect(
      (
        await errorCode(() =>
          host.openAttachment(BOB, "session.attachment", { sessionId: "mine", attachmentId }),
        )
      ).code,
    ).toBe("session_not_found");
  });

  test("openAttachment checks its params as `call` does, and is refused while the host shuts down", async () => {
    const { host } = await open();
    await host.call(ALICE, "session.create", { sessionId: "mine" });
    const bad = await errorCode(() =>
      host.openAttachment(ALICE, "session.attachment", {
        sessionId: "mine",
        attachmentId: "x",
        extra: 1,
      } as never),
    );
    expect(bad.code).toBe("bad_request");
    await host.shutdown();
    const refused = host.openAttachment(ALICE, "session.attachment", {
      sessionId: "mine",
      attachmentId: "x",
    });
    await expect(refused).rejects.toMatchObject({
      code: "host_shutting_down",
      message: "the host is shutting down; reconnect shortly",
    });
  });

  test("readAttachment answers its owner and the admin; anyone else as for a missing one", async () => {
    const { host } = await open();
    const attachmentId = await host.putAttachment(ALICE, {
      name: "n.txt",
      type: "text/plain",
      bytes: new Uint8Array([1, 2]),
    });
    const own = await host.readAttachment(ALICE, attachmentId);
    expect(own).toMatchObject({ name: "n.txt", type: "text/plain", size: 2, owner: "alice" });
    expect(await bytesOf(own!)).toEqual([1, 2]);
    expect(await host.readAttachment(ADMIN, attachmentId)).toMatchObject({ owner: "alice" });
    expect(await host.readAttachment(BOB, attachmentId)).toBeNull();
    expect(await host.readAttachment(ALICE, "no-such-attachment")).toBeNull();
  });
});

describe("storage", () => {
  test("storageUsage counts what a principal stores against its quota; the admin has none", async () => {
    const { host } = await open({ maxStoredBytesPerPrincipal: 5_000 });
    expect(await host.storageUsage(ALICE)).toEqual({ storedBytes: 0, maxBytes: 5_000 });
    await host.putAttachment(ALICE, { name: "a", type: "text/plain", bytes: new Uint8Array(100) });
    const usage = await host.storageUsage(ALICE);
    expect(usage.storedBytes).toBeGreaterThanOrEqual(100);
    expect(usage.maxBytes).toBe(5_000);
    expect(await host.storageUsage(ADMIN)).toEqual({ storedBytes: 0, maxBytes: null });
  });

  test("the quota defaults to the protocol's limit", async () => {
    const { host } = await open();
    expect(await host.storageUsage(ALICE)).toEqual({
      storedBytes: 0,
      maxBytes: Limits.storedBytesPerPrincipal,
    });
  });

  test("putAttachment stores the upload for its principal and is refused past the quota", async () => {
    const { host, store } = await open({ maxStoredBytesPerPrincipal: 150 });
    const first = await host.putAttachment(ALICE, {
      name: "a",
      type: "text/plain",
      bytes: new Uint8Array(200),
    });
    expect(await store.attachmentInfo(first)).toMatchObject({ owner: "alice", name: "a", size: 200 });
    const refused = await errorCode(() =>
      host.putAttachment(ALICE, { name: "b", type: "text/plain", bytes: new Uint8Array(1) }),
    );
    expect(refused).toMatchObject({ code: "storage_quota_exceeded", data: { maxBytes: 150 } });
    // others and the admin are not held by alice's quota
    await host.putAttachment(BOB, { name: "c", type: "text/plain", bytes: new Uint8Array(1) });
    await host.putAttachment(ADMIN, { name: "d", type: "text/plain", bytes: new Uint8Array(1) });
  });

  test("the quota admits writes while less is stored and refuses them once as much is stored, saying how much", async () => {
    const { host } = await open({ maxStoredBytesPerPrincipal: 300 });
    const upload = (name: string, size: number) =>
      host.putAttachment(ALICE, { name, type: "text/plain", bytes: new Uint8Array(size) });
    await upload("a", 200);
    const { storedBytes } = await host.storageUsage(ALICE);
    expect(storedBytes).toBe(200);
    // one byte under the quota: still admitted, and it may take the store past it
    await upload("b", 99);
    expect((await host.storageUsage(ALICE)).storedBytes).toBe(299);
    await upload("c", 1);
    // exactly the quota stored: the next write is refused
    const refused = await errorCode(() => upload("d", 1));
    expect(refused).toEqual({ code: "storage_quota_exceeded", data: { maxBytes: 300, storedBytes: 300 } });
    const message = await upload("e", 1).then(
      () => "admitted",
      (err: Error) => err.message,
    );
    expect(message).toBe(
      "alice stores 300 bytes (event data and attachments), the most allowed is 300; delete or clear sessions to add more",
    );
    expect((await host.storageUsage(ALICE)).storedBytes).toBe(300);
  });
});

describe("listeners", () => {
  test("onAnyCommit hears every commit and every dismissal until it is removed", async () => {
    const { host } = await open();
    await host.call(ALICE, "session.create", { sessionId: "s" });
    let heard = 0;
    const off = host.onAnyCommit(() => heard++);
    await host.call(ALICE, "session.rename", { sessionId: "s", title: "renamed" });
    expect(heard).toBe(1);
    await host.call(ALICE, "session.dismiss", { sessionId: "s" });
    // a dismissal's commit notice, heard once
    expect(heard).toBe(2);
    off();
    await host.call(ALICE, "session.restore", { sessionId: "s" });
    await host.call(ALICE, "session.rename", { sessionId: "s", title: "again" });
    expect(heard).toBe(2);
  });

  test("subscribeNotificationLists hands one tick's notifications to a principal as one list", async () => {
    const { host } = await open();
    await host.call(ALICE, "session.create", { sessionId: "s" });
    const lists: (readonly Notification[])[] = [];
    const others: (readonly Notification[])[] = [];
    const off = host.subscribeNotificationLists(ALICE, (list) => lists.push(list));
    host.subscribeNotificationLists(BOB, (list) => others.push(list));
    await host.call(ALICE, "session.rename", { sessionId: "s", title: "renamed" });
    await vi.waitFor(() => expect(lists).toHaveLength(1));
    expect(lists[0]!.map((n) => n.name)).toEqual(["session.updated"]);
    off();
    await host.call(ALICE, "session.rename", { sessionId: "s", title: "again" });
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(lists).toHaveLength(1);
    expect(others).toEqual([]);
  });
});

describe("reads", () => {
  test("openRead hands out the session as checked; another's session is not found", async () => {
    const { host } = await open();
    await host.call(ALICE, "session.create", { sessionId: "s", title: "T" });
    const handle = await host.openRead(ALICE, "s");
    expect(handle.sessionId).toBe("s");
    expect(handle.header).toMatchObject({ sessionId: "s", owner: "alice", title: "T" });
    expect(handle.headSeq).toBe(1);
    expect((await handle.readAfter(0, 10)).events.map((e) => e.type)).toEqual(["session/created"]);
    expect((await errorCode(() => host.openRead(BOB, "s"))).code).toBe("session_not_found");
  });

  test("a handle whose session was deleted since it was opened refuses every read session_retired", async () => {
    const { host } = await open();
    await host.call(ALICE, "session.create", { sessionId: "s" });
    const handle = await host.openRead(ALICE, "s");
    await host.call(ALICE, "session.delete", { sessionId: "s" });
    const retired = { code: "session_retired", data: { sessionId: "s" } };
    await expect(handle.readAfter(0, 10)).rejects.toMatchObject(retired);
    await expect(handle.readAfterEncoded(0, 10, 10)).rejects.toMatchObject(retired);
    await expect(handle.projection()).rejects.toMatchObject(retired);
  });

  test("a handle on a session the store never had answers its projection session_not_found", async () => {
    const { host, store } = await open();
    await host.call(ALICE, "session.create", { sessionId: "s" });
    const { header, headSeq } = await host.openRead(ALICE, "s");
    expect(await new SessionReadHandle(store, "s", { header, headSeq }).projection()).toMatchObject({
      sessionId: "s",
      owner: "alice",
    });
    const never = new SessionReadHandle(store, "never", { header, headSeq });
    await expect(never.projection()).rejects.toMatchObject({
      code: "session_not_found",
      data: { sessionId: "never" },
    });
  });

  test("a host alone on its store has no leases", async () => {
    const { host } = await open();
    expect(host.leases).toBeUndefined();
  });
});

/** An agent whose turns complete at once, writing nothing. */
const quickAgent: AgentDriver = {
  name: "quick",
  defaultModel: "demo-fast",
  models: () => new DemoAgent().models(),
  runTurn: async () => ({ state: "completed" }),
};

/** A store with sessions of `owner` holding one queued prompt each, as a stopped host leaves them. */
async function queuedSessions(dbPath: string, ids: string[], owner = "alice") {
  const store = SqliteSessionStore.open(dbPath);
  for (const sessionId of ids) {
    await store.create({ sessionId, owner, model: "demo-fast" });
    const queued = await store.enqueuePrompt({
      sessionId,
      itemId: `q-${sessionId}`,
      queuedAt: 1,
      input: { text: `for ${sessionId}`, clientMessageId: `m-${sessionId}` },
    });
    if (queued.status !== "queued") throw new Error(queued.status);
  }
  await store.close();
}

describe("start", () => {
  test("says how many open turns it closed, with its host id; nothing when there were none", async () => {
    const dir = tempDir();
    disposers.push(async () => dir.remove());
    const path = dir.file("sessions.db");
    const store = SqliteSessionStore.open(path);
    for (const sessionId of ["a", "b"]) {
      await store.create({ sessionId, owner: "alice", model: "demo-fast" });
      await store.append(sessionId, [
        { type: "turn/start", data: { turnId: `t-${sessionId}`, trigger: "prompt" } },
      ]);
    }
    const first = capturedLogger();
    const host = new SessionHost({ store, agent: new DemoAgent(), logger: first.logger, hostId: "h-1" });
    await host.start();
    await host.shutdown();
    expect(first.lines.filter((l) => l.msg === "closed open turns as interrupted")).toEqual([
      expect.objectContaining({ level: 30, hostId: "h-1", sessions: 2 }),
    ]);
    const second = capturedLogger();
    const again = new SessionHost({ store, agent: new DemoAgent(), logger: second.logger, hostId: "h-1" });
    await again.start();
    await again.shutdown();
    expect(second.lines.filter((l) => l.msg === "closed open turns as interrupted")).toEqual([]);
    await store.close();
  });

  test("a host given no logger writes no log lines", async () => {
    const dir = tempDir();
    disposers.push(async () => dir.remove());
    const store = SqliteSessionStore.open(dir.file("sessions.db"));
    disposers.push(() => store.close());
    await store.create({ sessionId: "a", owner: "alice", model: "demo-fast" });
    await store.append("a", [{ type: "turn/start", data: { turnId: "t-a", trigger: "prompt" } }]);
    // pino's default destination writes its lines to the standard output's descriptor
    const writes = [vi.spyOn(fs, "write"), vi.spyOn(fs, "writeSync")];
    const host = new SessionHost({ store, agent: new DemoAgent() });
    await host.start();
    await host.shutdown();
    await new Promise<void>((resolve) => setImmediate(resolve));
    const lines = writes.flatMap((spy) =>
      spy.mock.calls.filter(([fd, data]) => fd === 1 && String(data).includes("open turns")),
    );
    for (const spy of writes) spy.mockRestore();
    expect(lines).toEqual([]);
    expect((await readLog(store, "a")).at(-1)).toMatchObject({
      type: "turn/end",
      data: { state: "interrupted" },
    });
  });

  test("restores the queued prompts of every session, past one page, and says how many", async () => {
    const dir = tempDir();
    disposers.push(async () => dir.remove());
    const ids = Array.from({ length: 203 }, (_, i) => `s${String(i).padStart(3, "0")}`);
    await queuedSessions(dir.file("sessions.db"), ids);
    const store = SqliteSessionStore.open(dir.file("sessions.db"));
    const { logger, lines } = capturedLogger();
    const host = new SessionHost({ store, agent: quickAgent, logger });
    disposers.push(async () => {
      await host.shutdown();
      await store.close();
    });
    await host.start();
    expect(lines.filter((l) => l.msg === "restored queued prompts")).toEqual([
      expect.objectContaining({ level: 30, sessions: 203 }),
    ]);
    await vi.waitFor(
      async () => {
        const ended = await Promise.all(
          ids.map(async (id) => (await readLog(store, id)).some((e) => e.type === "turn/end")),
        );
        expect(ended.filter((done) => !done)).toEqual([]);
      },
      { timeout: 10_000, interval: 50 },
    );
  });

  test("lets the event loop run between the pages it restores", async () => {
    const dir = tempDir();
    disposers.push(async () => dir.remove());
    const ids = Array.from({ length: 201 }, (_, i) => `s${String(i).padStart(3, "0")}`);
    await queuedSessions(dir.file("sessions.db"), ids);
    const store = SqliteSessionStore.open(dir.file("sessions.db"));
    const host = new SessionHost({ store, agent: quickAgent });
    disposers.push(async () => {
      await host.shutdown();
      await store.close();
    });
    let ticks = 0;
    let ticking = true;
    const tick = () => {
      ticks++;
      if (ticking) setImmediate(tick);
    };
    const read = store.liveStatePage.bind(store);
    const ticksAtRead: number[] = [];
    vi.spyOn(store, "liveStatePage").mockImplementation((after, limit) => {
      ticksAtRead.push(ticks);
      return read(after, limit);
    });
    setImmediate(tick);
    await host.start();
    ticking = false;
    expect(ticksAtRead).toHaveLength(2);
    expect(ticksAtRead[1]).toBeGreaterThan(ticksAtRead[0]!);
  });

  test("a session whose owner is over its agent limit keeps its queue, with a warning, and is not counted", async () => {
    const dir = tempDir();
    disposers.push(async () => dir.remove());
    await queuedSessions(dir.file("sessions.db"), ["a", "b"]);
    const store = SqliteSessionStore.open(dir.file("sessions.db"));
    const { logger, lines } = capturedLogger();
    const host = new SessionHost({ store, agent: quickAgent, logger, maxLiveAgentsPerPrincipal: 1 });
    disposers.push(async () => {
      await host.shutdown();
      await store.close();
    });
    await host.start();
    expect(lines.filter((l) => l.msg === "restored queued prompts")).toEqual([
      expect.objectContaining({ sessions: 1 }),
    ]);
    expect(lines.filter((l) => l.msg === "queued prompts not restored")).toEqual([
      expect.objectContaining({
        level: 40,
        sessionId: "b",
        err: expect.objectContaining({ code: "too_many_agents" }),
      }),
    ]);
    expect((await store.queue("b")).map((i) => i.itemId)).toEqual(["q-b"]);
  });

  test("a prompt to a session whose queue was not restored queues behind it, and the queue runs first", async () => {
    const dir = tempDir();
    disposers.push(async () => dir.remove());
    await queuedSessions(dir.file("sessions.db"), ["a", "b"]);
    const store = SqliteSessionStore.open(dir.file("sessions.db"));
    const host = new SessionHost({ store, agent: quickAgent, maxLiveAgentsPerPrincipal: 1 });
    disposers.push(async () => {
      await host.shutdown();
      await store.close();
    });
    await host.start();
    // "a" ran its queued prompt and is idle, so the prompt may take its place; "b" has no agent
    await vi.waitFor(() => expect(host.live.agents()).toEqual([{ sessionId: "a", state: "idle" }]));
    expect(host.live.queue("b").map((i) => i.itemId)).toEqual(["q-b"]);
    const r = await host.call(ALICE, "session.prompt", { sessionId: "b", text: "new", clientMessageId: "n" });
    expect(r).toStrictEqual({ queued: true, itemId: expect.any(String) });
    await vi.waitFor(async () => {
      const log = await readLog(store, "b");
      expect(log.filter((e) => e.type === "turn/end")).toHaveLength(2);
    });
    const texts = (await readLog(store, "b")).flatMap((e) =>
      e.type === "user/message" ? [e.data.text] : [],
    );
    expect(texts).toEqual(["for b", "new"]);
  });
});

describe("agents' jobs", () => {
  test("job events carry the host's clock and a job's progress is stored", async () => {
    const { host, store } = await open({ now: () => 1_234_000 });
    await host.call(ADMIN, "session.create", { sessionId: "s" });
    await host.call(ADMIN, "session.prompt", { sessionId: "s", text: "/job 3", clientMessageId: "j" });
    // stored while it runs: the page holds running jobs only
    await vi.waitFor(async () => {
      const page = await store.liveStatePage(null, 10);
      expect(page.sessions[0]?.jobs[0]?.progress).toBeGreaterThan(0);
    });
    const started = (await readLog(store, "s")).find((e) => e.type === "job/started");
    expect(started?.at).toBe(1_234_000);
  });

  test("a session runs at most 64 jobs at once: the prompt past it ends its turn failed and starts no job", async () => {
    const { host, store } = await open();
    await host.call(ALICE, "session.create", { sessionId: "s" });
    // a job outlives its turn: each `/job 600` prompt leaves one running for ten minutes
    for (let i = 0; i <= 64; i++)
      await host.call(ALICE, "session.prompt", {
        sessionId: "s",
        text: "/job 600",
        clientMessageId: `j${i}`,
      });
    await vi.waitFor(
      async () => {
        const ends = (await readLog(store, "s")).filter((e) => e.type === "turn/end");
        expect(ends).toHaveLength(65);
      },
      { timeout: 30_000 },
    );
    const log = await readLog(store, "s");
    const ends = log.flatMap((e) => (e.type === "turn/end" ? [e.data.state] : []));
    expect(ends.slice(0, 64).every((state) => state === "completed")).toBe(true);
    expect(ends[64]).toBe("failed");
    expect(log.filter((e) => e.type === "job/started")).toHaveLength(64);
    const running = () => host.live.jobs("s").filter((job) => job.state === "running");
    expect(running()).toHaveLength(64);
  });

  test("turn.startJob past a bound throws overloaded naming it, and records nothing", async () => {
    const refusals: unknown[] = [];
    const jobsAgent: AgentDriver = {
      ...quickAgent,
      runTurn: async (turn) => {
        for (let i = 0; i < 10; i++) {
          try {
            turn.startJob(`j${i}`);
          } catch (err) {
            refusals.push(err);
            break;
          }
        }
        return { state: "completed" };
      },
    };
    const { host, store } = await open({
      agent: jobsAgent,
      maxRunningJobsPerSession: 3,
      maxRunningJobsPerPrincipal: 5,
    });
    for (const sessionId of ["a", "b"]) {
      await host.call(ALICE, "session.create", { sessionId });
      await host.call(ALICE, "session.prompt", { sessionId, text: "go", clientMessageId: "m" });
      await vi.waitFor(async () =>
        expect((await readLog(store, sessionId)).some((e) => e.type === "turn/end")).toBe(true),
      );
    }
    expect(refusals).toEqual([
      expect.objectContaining({ code: "overloaded", data: { limit: "running_jobs_per_session", max: 3 } }),
      expect.objectContaining({ code: "overloaded", data: { limit: "running_jobs_per_principal", max: 5 } }),
    ]);
    expect(host.live.jobs("a")).toHaveLength(3);
    expect(host.live.jobs("b")).toHaveLength(2);
    for (const sessionId of ["a", "b"]) {
      const started = (await readLog(store, sessionId)).filter((e) => e.type === "job/started");
      expect(started).toHaveLength(sessionId === "a" ? 3 : 2);
    }
  });

  test("a job a stopped turn starts once its session was deleted is refused, and holds no place", async () => {
    const late: unknown[] = [];
    const windingDown: AgentDriver = {
      ...quickAgent,
      runTurn: async (turn) => {
        if (turn.sessionId === "a") {
          await new Promise((resolve) => turn.signal.addEventListener("abort", resolve, { once: true }));
          // an agent unwinding after the abort starts a job: its session is gone meanwhile
          try {
            late.push(turn.startJob("late"));
          } catch (err) {
            late.push(err);
          }
          return { state: "cancelled" };
        }
        turn.startJob("next");
        return { state: "completed" };
      },
    };
    const { host, store } = await open({ agent: windingDown, maxRunningJobsPerPrincipal: 1 });
    await host.call(ALICE, "session.create", { sessionId: "a" });
    await host.call(ALICE, "session.prompt", { sessionId: "a", text: "go", clientMessageId: "m" });
    await vi.waitFor(() => expect(host.live.isRunning("a")).toBe(true));
    await host.call(ALICE, "session.delete", { sessionId: "a" });
    await vi.waitFor(() => expect(late).toHaveLength(1));
    expect(late[0]).toMatchObject({ name: "AbortError", stop: "delete" });
    // the principal's one place is free for its next session's job
    await host.call(ALICE, "session.create", { sessionId: "b" });
    await host.call(ALICE, "session.prompt", { sessionId: "b", text: "go", clientMessageId: "m" });
    await vi.waitFor(async () =>
      expect((await readLog(store, "b")).find((e) => e.type === "turn/end")?.data).toMatchObject({
        state: "completed",
      }),
    );
    expect(host.live.jobs("b").map((job) => job.label)).toEqual(["next"]);
  });

  test("once shutdown settles, running turns and jobs are closed interrupted in the log", async () => {
    const { host, store } = await open();
    await host.call(ADMIN, "session.create", { sessionId: "turn" });
    await host.call(ADMIN, "session.create", { sessionId: "job" });
    const r = await host.call(ADMIN, "session.prompt", {
      sessionId: "turn",
      text: "/sleep 60000",
      clientMessageId: "t",
    });
    await host.call(ADMIN, "session.prompt", { sessionId: "job", text: "/job 60", clientMessageId: "j" });
    await vi.waitFor(async () =>
      expect((await readLog(store, "job")).some((e) => e.type === "job/started")).toBe(true),
    );
    await host.shutdown();
    const turnLog = await readLog(store, "turn");
    expect(turnLog.at(-1)).toMatchObject({
      type: "turn/end",
      data: { turnId: r.turnId, state: "interrupted" },
    });
    const jobLog = await readLog(store, "job");
    expect(jobLog.filter((e) => e.type === "job/ended").map((e) => e.data)).toEqual([
      { jobId: expect.any(String), state: "interrupted" },
    ]);
  });
});

describe("shutdown", () => {
  test("waits for a stopped turn's agent to return and its turn/end to land, then closes the agent", async () => {
    const order: string[] = [];
    const slowToStop: AgentDriver = {
      ...quickAgent,
      runTurn: async (turn) => {
        await new Promise((resolve) => turn.signal.addEventListener("abort", resolve, { once: true }));
        // an agent unwinding after the abort: a few turns of the event loop
        for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
        order.push("returned");
        return { state: "cancelled" };
      },
      close: async () => {
        order.push("closed");
      },
    };
    const { host, store } = await open({ agent: slowToStop });
    await host.call(ADMIN, "session.create", { sessionId: "s" });
    const r = await host.call(ADMIN, "session.prompt", { sessionId: "s", text: "x", clientMessageId: "p" });
    await vi.waitFor(() => expect(host.live.isRunning("s")).toBe(true));
    const first = host.shutdown();
    expect(host.shutdown()).toBe(first);
    await first;
    expect(order).toEqual(["returned", "closed"]);
    expect((await readLog(store, "s")).at(-1)).toMatchObject({
      type: "turn/end",
      data: { turnId: r.turnId, state: "interrupted" },
    });
  });
});

describe("dismissals", () => {
  test("a prompt brings back a session its principal dismissed", async () => {
    const { host, store } = await open();
    await host.call(ALICE, "session.create", { sessionId: "s" });
    await host.call(ALICE, "session.dismiss", { sessionId: "s" });
    expect(await store.isDismissed("s", "alice")).toBe(true);
    const r = await host.call(ALICE, "session.prompt", {
      sessionId: "s",
      text: "hello",
      clientMessageId: "p",
    });
    await turnEvents(store, "s", r.turnId!);
    await vi.waitFor(async () => expect(await store.isDismissed("s", "alice")).toBe(false));
  });
});
