import { createHook } from "node:async_hooks";
import { afterEach, describe, expect, test, vi } from "vitest";
import { Limits } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import { userMessage } from "../store/open-store.js";
import { capturedLogger } from "../support/log-capture.js";
import {
  beforeAppend,
  demoAgentWith,
  errorCode,
  type HostFixture,
  openHost,
  readLog,
  turnEvents,
} from "./host-fixture.js";

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "life";

function liveSet(): string[] {
  return fx.host.live
    .agents()
    .map((a) => a.sessionId)
    .sort();
}

describe("session.create", () => {
  test("assigns a random id, the principal as owner and the agent's default model; refuses an existing id", async () => {
    fx = await openHost();
    const { header } = await fx.host.call({ name: "alice", admin: false }, "session.create", { title: "T" });
    expect(header).toMatchObject({ owner: "alice", model: "demo-fast", title: "T" });
    expect(header.sessionId).toMatch(/^[A-Za-z0-9_-]{1,128}$/);
    const again = await errorCode(() =>
      fx.host.call(ADMIN, "session.create", { sessionId: header.sessionId }),
    );
    expect(again.code).toBe("session_exists");
    const badModel = await errorCode(() => fx.host.call(ADMIN, "session.create", { model: "gpt-9" }));
    expect(badModel).toMatchObject({ code: "bad_request", data: { field: "/model" } });
  });

  test("records the origin on session/created; without one, none", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: "from-web", origin: "web" });
    await fx.host.call(ADMIN, "session.create", { sessionId: "plain" });
    expect((await readLog(fx.store, "from-web"))[0]).toMatchObject({
      type: "session/created",
      data: { origin: "web" },
    });
    const [created] = await readLog(fx.store, "plain");
    expect(created?.type === "session/created" && "origin" in created.data).toBe(false);
  });

  test("a session deleted before it is announced still answers its header, and is not announced", async () => {
    fx = await openHost();
    const added: string[] = [];
    fx.host.subscribeNotifications(ADMIN, (n) => {
      if (n.name === "session.added") added.push(n.value.row.sessionId);
    });
    const projection = fx.store.projection.bind(fx.store);
    vi.spyOn(fx.store, "projection").mockImplementationOnce(async (sessionId) => {
      expect((await fx.store.delete(sessionId)).status).toBe("deleted");
      return projection(sessionId);
    });
    const { header } = await fx.host.call(ADMIN, "session.create", { sessionId: S });
    expect(header.sessionId).toBe(S);
    // notifications keep their order: once a later create is announced, this one never will be
    await fx.host.call(ADMIN, "session.create", { sessionId: "later" });
    await vi.waitFor(() => expect(added).toContain("later"));
    expect(added).toEqual(["later"]);
  });

  test("a create the host starts shutting down under still answers the session it wrote, logged at debug", async () => {
    const { logger, lines } = capturedLogger();
    fx = await openHost({ logger });
    const create = fx.store.create.bind(fx.store);
    let stopping: Promise<void> | undefined;
    vi.spyOn(fx.store, "create").mockImplementationOnce(async (input) => {
      const created = await create(input);
      stopping = fx.host.shutdown();
      return created;
    });
    const { header } = await fx.host.call(ADMIN, "session.create", { sessionId: S });
    expect(header).toMatchObject({ sessionId: S, owner: "admin" });
    expect(liveSet()).toEqual([]);
    await stopping;
    expect((await fx.store.header(S)).status).toBe("ok");
    // an expected refusal: not an error
    expect(lines.filter((l) => l.sessionId === S && String(l.msg).startsWith("session created"))).toEqual([
      expect.objectContaining({
        level: 20,
        msg: "session created without an agent",
        err: expect.objectContaining({ code: "host_shutting_down" }),
      }),
    ]);
  });

  test("params are validated again when called directly", async () => {
    fx = await openHost();
    const outcome = await errorCode(() => fx.host.call(ADMIN, "session.create", { sessionId: "../.." }));
    expect(outcome).toMatchObject({ code: "bad_request", data: { field: "/sessionId" } });
    const limit = await errorCode(() => fx.host.call(ADMIN, "session.list", { limit: 0 }));
    expect(limit).toMatchObject({ code: "bad_request", data: { field: "/limit" } });
  });
});

describe("session.clear", () => {
  test("is refused session_busy while a turn runs; afterwards it changes the epoch", async () => {
    fx = await openHost();
    const { header } = await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/ask wait",
      clientMessageId: "1",
    });
    const busy = await errorCode(() => fx.host.call(ADMIN, "session.clear", { sessionId: S }));
    expect(busy).toEqual({ code: "session_busy", data: { sessionId: S } });
    await fx.host.call(ADMIN, "session.cancel", { sessionId: S });
    await turnEvents(fx.store, S, r.turnId!);
    await vi.waitFor(() => expect(fx.host.live.isRunning(S)).toBe(false));
    const stale = await errorCode(() =>
      fx.host.call(ADMIN, "session.clear", { sessionId: S, expectedEpoch: "other" }),
    );
    expect(stale).toEqual({ code: "epoch_mismatch", data: { sessionId: S, epoch: header.epoch } });
    const { epoch } = await fx.host.call(ADMIN, "session.clear", {
      sessionId: S,
      expectedEpoch: header.epoch,
    });
    expect(epoch).not.toBe(header.epoch);
    const after = await fx.store.header(S);
    expect(after.status === "ok" && after.header.epoch).toBe(epoch);
    expect(await readLog(fx.store, S)).toEqual([]);
  });

  test("a session with no agent is cleared; a turn whose opening append is still in flight refuses it", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    await fx.restart();
    expect(liveSet()).toEqual([]);
    const { epoch } = await fx.host.call(ADMIN, "session.clear", { sessionId: S });
    const refusals: string[] = [];
    const seen = beforeAppend(
      fx.store,
      (events) => events[0]?.type === "turn/start",
      async () => {
        refusals.push((await errorCode(() => fx.host.call(ADMIN, "session.clear", { sessionId: S }))).code);
      },
    );
    const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "hi", clientMessageId: "1" });
    expect(seen.ran).toBe(true);
    expect(refusals).toEqual(["session_busy"]);
    const after = await fx.store.header(S);
    expect(after.status === "ok" && after.header.epoch).toBe(epoch);
    expect((await turnEvents(fx.store, S, r.turnId!))[0]).toMatchObject({ type: "turn/start" });
  });
});

describe("session.delete", () => {
  test("during a running turn stops it, detaches the agent, and later writes fail session_retired", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/stream 1000 5",
      clientMessageId: "1",
    });
    await vi.waitFor(async () =>
      expect((await readLog(fx.store, S)).filter((e) => e.type === "assistant/delta").length).toBeGreaterThan(
        1,
      ),
    );
    const removed: string[] = [];
    fx.host.subscribeNotifications(ADMIN, (n) => {
      if (n.name === "session.removed") removed.push(n.value.sessionId);
    });
    expect(await fx.host.call(ADMIN, "session.delete", { sessionId: S })).toEqual({ deleted: true });
    expect(liveSet()).toEqual([]);
    expect(removed).toEqual([S]);
    for (const call of [
      () => fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "x", clientMessageId: "2" }),
      () => fx.host.call(ADMIN, "session.rename", { sessionId: S, title: "x" }),
      () => fx.host.call(ADMIN, "session.create", { sessionId: S }),
      () => fx.host.call(ADMIN, "session.page", { sessionId: S }),
    ]) {
      expect((await errorCode(call)).code).toBe("session_retired");
    }
    // the stopped turn wrote nothing after the tombstone
    expect((await fx.store.readAfter(S, 0, 10)).status).toBe("retired");
    expect(await fx.store.isRetired(S)).toBe(true);
  });

  test("the admin deleting another's session tells its owner", async () => {
    fx = await openHost();
    const alice = { name: "alice", admin: false };
    await fx.host.call(alice, "session.create", { sessionId: S });
    const removed: string[] = [];
    fx.host.subscribeNotifications(alice, (n) => {
      if (n.name === "session.removed") removed.push(n.value.sessionId);
    });
    expect(await fx.host.call(ADMIN, "session.delete", { sessionId: S })).toEqual({ deleted: true });
    await vi.waitFor(() => expect(removed).toEqual([S]));
  });

  test("an agent a prompt attaches while the delete is in flight is stopped and detached as well", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    await fx.restart();
    expect(liveSet()).toEqual([]);
    const remove = fx.store.delete.bind(fx.store);
    let prompted: Promise<unknown> | undefined;
    vi.spyOn(fx.store, "delete").mockImplementationOnce(async (sessionId) => {
      prompted = fx.host
        .call(ADMIN, "session.prompt", { sessionId: S, text: "/sleep 30000", clientMessageId: "late" })
        .catch((err: { code?: string }) => err.code);
      await vi.waitFor(() => expect(liveSet()).toEqual([S]));
      return remove(sessionId);
    });
    expect(await fx.host.call(ADMIN, "session.delete", { sessionId: S })).toEqual({ deleted: true });
    expect(liveSet()).toEqual([]);
    await prompted;
  });

  test("stops the running turn before the log goes: a prompt queued behind it never reaches the agent", async () => {
    const prompts: string[] = [];
    const first: { signal?: AbortSignal; end?: () => void } = {};
    // the first turn runs until it is stopped or until the test ends it as if its model were done
    const agent = demoAgentWith("gated", (turn) => {
      prompts.push(turn.prompt.text);
      if (prompts.length > 1) return Promise.resolve({ state: "completed" });
      first.signal = turn.signal;
      return new Promise((resolve) => {
        first.end = () => resolve({ state: "completed" });
        turn.signal.addEventListener("abort", () => resolve({ state: "cancelled" }));
      });
    });
    fx = await openHost({ agent });
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "first", clientMessageId: "1" });
    await vi.waitFor(() => expect(first.end).toBeDefined());
    expect(
      await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "second", clientMessageId: "2" }),
    ).toMatchObject({ queued: true });
    const remove = fx.store.delete.bind(fx.store);
    let stoppedBeforeTombstone: boolean | undefined;
    vi.spyOn(fx.store, "delete").mockImplementationOnce(async (sessionId) => {
      stoppedBeforeTombstone = first.signal?.aborted;
      // the turn ends on its own while the tombstone is on its way; a turn still running would
      // now hand the agent the queued prompt, within a few commits
      first.end?.();
      await vi
        .waitFor(() => expect(prompts).toContain("second"), { timeout: 500, interval: 5 })
        .catch(() => undefined);
      return remove(sessionId);
    });
    expect(await fx.host.call(ADMIN, "session.delete", { sessionId: S })).toEqual({ deleted: true });
    expect(prompts).toEqual(["first"]);
    expect(stoppedBeforeTombstone).toBe(true);
    expect(liveSet()).toEqual([]);
  });

  test("a delete that loses to another delete landing first is session_retired and announces nothing more", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const removed: string[] = [];
    fx.host.subscribeNotifications(ADMIN, (n) => {
      if (n.name === "session.removed") removed.push(n.value.sessionId);
    });
    const remove = fx.store.delete.bind(fx.store);
    vi.spyOn(fx.store, "delete").mockImplementationOnce(async (sessionId) => {
      expect((await remove(sessionId)).status).toBe("deleted");
      return remove(sessionId);
    });
    expect(await errorCode(() => fx.host.call(ADMIN, "session.delete", { sessionId: S }))).toEqual({
      code: "session_retired",
      data: { sessionId: S },
    });
    // notifications keep their order: once a later delete is announced, this one never will be
    await fx.host.call(ADMIN, "session.create", { sessionId: "later" });
    await fx.host.call(ADMIN, "session.delete", { sessionId: "later" });
    await vi.waitFor(() => expect(removed).toContain("later"));
    expect(removed).toEqual(["later"]);
  });
});

describe("session.fork", () => {
  test("copies the prefix with lineage, activates only the target and reads the source cold", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: "src" });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "src",
      text: "hello",
      clientMessageId: "1",
    });
    await turnEvents(fx.store, "src", r.turnId!);
    await fx.restart();
    const { header } = await fx.host.call(ADMIN, "session.fork", {
      sourceId: "src",
      sessionId: "dst",
      atSeq: r.seq!,
    });
    expect(header.forkOf).toEqual({ sessionId: "src", seq: r.seq });
    expect(liveSet()).toEqual(["dst"]);
    const copied = await readLog(fx.store, "dst");
    expect(copied[0]).toMatchObject({
      type: "session/created",
      data: { forkOf: { sessionId: "src", seq: r.seq } },
    });
    expect(copied.some((e) => e.type === "user/message" && e.data.text === "hello")).toBe(true);
    const missing = await errorCode(() => fx.host.call(ADMIN, "session.fork", { sourceId: "nope" }));
    expect(missing.code).toBe("session_not_found");
  });

  test("into an existing id is session_exists; a source deleted after the check is session_retired", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: "src" });
    await fx.host.call(ADMIN, "session.create", { sessionId: "taken" });
    expect(
      await errorCode(() => fx.host.call(ADMIN, "session.fork", { sourceId: "src", sessionId: "taken" })),
    ).toEqual({ code: "session_exists", data: { sessionId: "taken" } });
    const fork = fx.store.fork.bind(fx.store);
    vi.spyOn(fx.store, "fork").mockImplementationOnce(async (input) => {
      expect((await fx.store.delete(input.sourceId)).status).toBe("deleted");
      return fork(input);
    });
    expect(
      await errorCode(() => fx.host.call(ADMIN, "session.fork", { sourceId: "src", sessionId: "dst" })),
    ).toEqual({ code: "session_retired", data: { sessionId: "src" } });
    expect((await fx.store.header("dst")).status).toBe("not_found");
    expect(liveSet()).not.toContain("dst");
  });

  test("at a seq past the source's head is bad_request naming atSeq and the head; nothing is created or started", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: "src" });
    await fx.restart();
    const { sessions } = await fx.host.call(ADMIN, "session.list", {});
    const refused = await errorCode(() =>
      fx.host.call(ADMIN, "session.fork", { sourceId: "src", sessionId: "dst", atSeq: 2 }),
    );
    expect(refused).toEqual({ code: "bad_request", data: { field: "/atSeq", headSeq: 1 } });
    expect((await fx.store.header("dst")).status).toBe("not_found");
    expect((await fx.host.call(ADMIN, "session.list", {})).sessions).toEqual(sessions);
    expect(liveSet()).toEqual([]);
  });

  test("of a prefix holding more event data than one whole read is transcript_too_large; nothing is created or started", async () => {
    const maxTranscriptBytes = 100_000;
    fx = await openHost({ maxTranscriptBytes });
    await fx.host.call(ADMIN, "session.create", { sessionId: "src" });
    // seq 2 and 3: 60 kB each, so the log passes the bound at seq 3
    await fx.store.append("src", [userMessage("a".repeat(60_000)), userMessage("b".repeat(60_000))]);
    await fx.restart();
    const { sessions } = await fx.host.call(ADMIN, "session.list", {});
    for (const atSeq of [undefined, 3]) {
      const refused = await errorCode(() =>
        fx.host.call(ADMIN, "session.fork", {
          sourceId: "src",
          sessionId: "dst",
          ...(atSeq ? { atSeq } : {}),
        }),
      );
      expect(refused).toEqual({
        code: "transcript_too_large",
        data: { sessionId: "src", maxDataBytes: maxTranscriptBytes, maxEvents: Limits.maxForkEvents },
      });
    }
    expect((await fx.store.header("dst")).status).toBe("not_found");
    expect((await fx.host.call(ADMIN, "session.list", {})).sessions).toEqual(sessions);
    expect(liveSet()).toEqual([]);
    const { header } = await fx.host.call(ADMIN, "session.fork", {
      sourceId: "src",
      sessionId: "dst",
      atSeq: 2,
    });
    expect(header.forkOf).toEqual({ sessionId: "src", seq: 2 });
  });
});

describe("session.fork of many events", () => {
  test("of a prefix of more events than one fork copies is transcript_too_large, however little data they hold", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: "src" });
    // seq 2 to maxForkEvents + 1: tiny messages, far under the data bound
    const events = Array.from({ length: Limits.maxForkEvents }, (_, i) => userMessage(`m${i}`));
    for (let i = 0; i < events.length; i += 4096)
      expect((await fx.store.append("src", events.slice(i, i + 4096))).status).toBe("appended");
    await fx.restart();
    const refused = await errorCode(() =>
      fx.host.call(ADMIN, "session.fork", { sourceId: "src", sessionId: "dst" }),
    );
    expect(refused).toEqual({
      code: "transcript_too_large",
      data: { sessionId: "src", maxDataBytes: Limits.transcriptViewBytes, maxEvents: Limits.maxForkEvents },
    });
    expect((await fx.store.header("dst")).status).toBe("not_found");
    const { header } = await fx.host.call(ADMIN, "session.fork", {
      sourceId: "src",
      sessionId: "dst",
      atSeq: Limits.maxForkEvents,
    });
    expect(header.forkOf).toEqual({ sessionId: "src", seq: Limits.maxForkEvents });
  });
});

describe("agent lifecycle", () => {
  test("an idle agent detaches after idleDetachMs, emitting detached", async () => {
    fx = await openHost({ idleDetachMs: 50 });
    const states: string[] = [];
    fx.host.live.subscribe((d) => {
      if (d.kind === "agent") states.push(d.state);
    });
    // created cold, so the prompt attaches and starts its turn in one step
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "hi", clientMessageId: "1" });
    await turnEvents(fx.store, S, r.turnId!);
    await vi.waitFor(() => expect(liveSet()).toEqual([]), { timeout: 5000, interval: 10 });
    expect(states).toEqual(["attached", "running", "idle", "detached"]);
    expect((await fx.metrics.agentsLiveGauge.get()).values[0]?.value).toBe(0);
  });

  test("an agent with a running background job is not detached while the job runs", async () => {
    fx = await openHost({ idleDetachMs: 20 });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "/job 0.5", clientMessageId: "1" });
    await vi.waitFor(() => expect(fx.host.live.jobs(S)[0]?.progress).toBeGreaterThan(0));
    expect(liveSet()).toEqual([S]);
    await vi.waitFor(() => expect(fx.host.live.jobs(S)[0]?.state ?? "gone").not.toBe("running"), {
      timeout: 5000,
    });
    await vi.waitFor(() => expect(liveSet()).toEqual([]), { timeout: 5000 });
  });

  test("a restart closes turns the log shows open as interrupted", async () => {
    fx = await openHost();
    // what a crashed process leaves behind: a turn opened and never closed
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    await fx.store.append(S, [{ type: "turn/start", data: { turnId: "t-open", trigger: "prompt" } }]);
    await fx.restart();
    const log = await readLog(fx.store, S);
    expect(log.at(-1)).toMatchObject({ type: "turn/end", data: { turnId: "t-open", state: "interrupted" } });
    expect((await fx.store.projection(S))?.lastState).toBe("interrupted");
  });

  test("shutdown interrupts running turns, refuses new work and leaves no timers behind", async () => {
    // every timer created from here on is tracked until it fires or is cleared
    const timers = new Set<number>();
    const hook = createHook({
      init(asyncId, type) {
        if (type === "Timeout") timers.add(asyncId);
      },
      destroy(asyncId) {
        timers.delete(asyncId);
      },
    }).enable();
    try {
      fx = await openHost({ idleDetachMs: 60_000 });
      await fx.host.call(ADMIN, "session.create", { sessionId: S });
      await fx.host.call(ADMIN, "session.create", { sessionId: "idle-one" });
      const r = await fx.host.call(ADMIN, "session.prompt", {
        sessionId: S,
        text: "/sleep 60000",
        clientMessageId: "1",
      });
      await fx.host.call(ADMIN, "session.prompt", {
        sessionId: "idle-one",
        text: "/job 60",
        clientMessageId: "2",
      });
      await vi.waitFor(() =>
        expect(fx.host.live.agents()).toContainEqual({ sessionId: "idle-one", state: "idle" }),
      );
      expect(fx.host.live.jobs("idle-one")).toMatchObject([{ state: "running" }]);
      // the sleeping turn, the job's next step and the idle clock of "idle-one" at least
      expect(timers.size).toBeGreaterThanOrEqual(3);
      await fx.host.shutdown();
      const events = await turnEvents(fx.store, S, r.turnId!);
      expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "interrupted" } });
      expect(fx.host.live.agents()).toEqual([]);
      const refused = await errorCode(() => fx.host.call(ADMIN, "session.list", {}));
      expect(refused.code).toBe("host_shutting_down");
      // destroy hooks run asynchronously: wait for exactly the timers that existed at shutdown's end
      const leftAtShutdown = [...timers];
      await vi.waitFor(() => expect(leftAtShutdown.filter((id) => timers.has(id))).toEqual([]), {
        timeout: 5000,
        interval: 10,
      });
    } finally {
      hook.disable();
    }
  });
});
