import { describe, expect, test } from "vitest";
import type { CallMethod, ParamsOf } from "../../protocol/index.js";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost, type SessionHostOptions } from "../../src/host/session-host.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { tempDir } from "../support/temp-dir.js";
import { withMembers } from "../support/with-members.js";
import { readLog } from "./host-fixture.js";

/**
 * A session is written before its agent attaches: whatever the attach throws, the create or fork
 * answers the session it wrote. An expected refusal is logged at debug, anything else as an error.
 */

const cleanups = cleanupsAfterEach();
const ALICE = { name: "alice", admin: false };
const LEVEL = { debug: 20, error: 50 };

/**
 * A real host on a real SQLite file whose store fails the read that attaching `failing` makes
 * (its header, read again to attach the agent), as a disk error would: the write before it stands.
 */
async function hostFailingToAttach(failing: string, options: Partial<SessionHostOptions> = {}) {
  const dir = tempDir();
  const dbPath = dir.file("sessions.db");
  const store = SqliteSessionStore.open(dbPath);
  const { logger, lines } = capturedLogger();
  let failures = 0;
  const failingStore = withMembers(store, {
    header: async (sessionId: string) => {
      if (sessionId !== failing) return store.header(sessionId);
      failures++;
      throw Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR" });
    },
  });
  const host = new SessionHost({ store: failingStore, agent: new DemoAgent(), logger, ...options });
  await host.start();
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await host.shutdown();
    await store.close();
  };
  cleanups.push(async () => {
    await close();
    dir.remove();
  });
  return { host, store, dbPath, lines, failures: () => failures, close };
}

describe("a session whose agent fails to attach after it was written", () => {
  const cases: { method: CallMethod; params: (id: string) => ParamsOf<"session.create" | "session.fork"> }[] =
    [
      { method: "session.create", params: (id) => ({ sessionId: id, title: "kept" }) },
      { method: "session.fork", params: (id) => ({ sourceId: "source", sessionId: id }) },
    ];
  for (const { method, params } of cases) {
    test(`${method} for an unexpected reason answers the session, keeps it, logs an error naming both, and the host goes on`, async () => {
      const failing = `${method.replace(".", "-")}-target`;
      const fx = await hostFailingToAttach(failing);
      await fx.host.call(ALICE, "session.create", { sessionId: "source" });

      const answer = (await fx.host.call(ALICE, method, params(failing) as never)) as {
        header: { sessionId: string; owner: string };
      };
      expect(answer.header).toMatchObject({ sessionId: failing, owner: "alice" });
      expect(fx.failures()).toBe(1);
      expect(fx.host.live.agents().map((a) => a.sessionId)).not.toContain(failing);
      const logged = fx.lines.filter((l) => l.sessionId === failing && l.level === LEVEL.error);
      expect(logged).toEqual([
        expect.objectContaining({
          msg: "session created without an agent: its agent failed to attach",
          err: expect.objectContaining({ message: "disk I/O error", code: "SQLITE_IOERR" }),
        }),
      ]);

      // the host goes on: another session is created and runs a turn
      await fx.host.call(ALICE, "session.create", { sessionId: "after" });
      await fx.host.call(ALICE, "session.prompt", {
        sessionId: "after",
        text: "hello",
        clientMessageId: "a1",
      });
      await expect
        .poll(async () => (await readLog(fx.store, "after")).some((e) => e.type === "turn/end"))
        .toBe(true);

      // durable: a store opened afresh on the file has the session
      await fx.close();
      const reopened = SqliteSessionStore.open(fx.dbPath);
      cleanups.push(() => reopened.close());
      expect(await reopened.header(failing)).toMatchObject({
        status: "ok",
        header: { sessionId: failing, owner: "alice" },
      });
    });
  }

  // the other expected refusal, a shutdown begun after the write: lifecycle.test.ts
  test("an expected refusal (every agent of the principal at work) is logged at debug, not as an error", async () => {
    const fx = await hostFailingToAttach("none", { maxLiveAgentsPerPrincipal: 1 });
    await fx.host.call(ADMIN, "session.create", { sessionId: "busy" });
    await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "busy",
      text: "/sleep 60000",
      clientMessageId: "b1",
    });
    const { header } = await fx.host.call(ADMIN, "session.create", { sessionId: "new" });
    expect(header.sessionId).toBe("new");
    expect(
      fx.lines.filter((l) => l.sessionId === "new" && l.msg?.toString().startsWith("session created")),
    ).toEqual([
      expect.objectContaining({
        level: LEVEL.debug,
        msg: "session created without an agent",
        err: expect.objectContaining({ code: "too_many_agents" }),
      }),
    ]);
  });
});

describe("a session whose announcement read fails after it was written", () => {
  for (const method of ["session.create", "session.fork"] as const) {
    test(`${method} answers the session it wrote, once, and logs a warning`, async () => {
      const dir = tempDir();
      const dbPath = dir.file("sessions.db");
      const store = SqliteSessionStore.open(dbPath);
      const { logger, lines } = capturedLogger();
      const target = `${method.replace(".", "-")}-target`;
      // the read of the new row that announces it to the principal's sockets, as a lost
      // connection to the database would fail it: the write before it stands
      const failingStore = withMembers(store, {
        projection: async (sessionId: string) => {
          if (sessionId === target) throw Object.assign(new Error("connection lost"), { code: "ECONNRESET" });
          return store.projection(sessionId);
        },
      });
      const host = new SessionHost({ store: failingStore, agent: new DemoAgent(), logger });
      await host.start();
      cleanups.push(async () => {
        await host.shutdown();
        await store.close();
        dir.remove();
      });
      await host.call(ALICE, "session.create", { sessionId: "source" });
      const params =
        method === "session.create" ? { sessionId: target } : { sourceId: "source", sessionId: target };
      const answer = (await host.call(ALICE, method, params as never)) as { header: { sessionId: string } };
      expect(answer.header.sessionId).toBe(target);
      expect(lines.filter((l) => l.sessionId === target && l.level === 40)).toEqual([
        expect.objectContaining({ err: expect.objectContaining({ code: "ECONNRESET" }) }),
      ]);
      const { sessions } = await host.call(ALICE, "session.list", {});
      expect(sessions.map((row: { sessionId: string }) => row.sessionId).sort()).toEqual(
        ["source", target].sort(),
      );
    });
  }
});
