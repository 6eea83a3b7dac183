import { afterEach, describe, expect, test, vi } from "vitest";
import type { ParamsOf, SessionEvent } from "../../protocol/index.js";
import { ADMIN, type Principal } from "../../src/host/principal.js";
import { assistantText, errorCode, type HostFixture, openHost, readLog, turnEvents } from "./host-fixture.js";

/** protocol-v1 §5 live state is durable: queued prompts and parked turns survive a host restart. */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "durable";

function userTexts(log: SessionEvent[]): string[] {
  return log.flatMap((e) => (e.type === "user/message" ? [e.data.text] : []));
}

async function prompt(text: string, clientMessageId: string) {
  return fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId });
}

async function parkedApproval(action: string) {
  const r = await prompt(`/approve ${action}`, `approve-${action}`);
  const interaction = await vi.waitFor(
    async () => {
      const found = fx.host.live.interactions().find((i) => i.turnId === r.turnId);
      expect(found).toBeDefined();
      expect((await fx.store.projection(S))?.lastState).toBe("input-required");
      return found!;
    },
    { timeout: 10_000 },
  );
  return { turnId: r.turnId!, interaction };
}

describe("live state across a restart", () => {
  test("a parked approval and two queued prompts survive; the answer finishes the turn, each prompt runs once in order", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const { turnId, interaction } = await parkedApproval("deploy");
    const q1 = await prompt("first queued", "q1");
    const q2 = await prompt("second queued", "q2");
    expect(q1).toMatchObject({ queued: true });
    expect(q2).toMatchObject({ queued: true });

    await fx.restart();
    // still parked: list state, the pending interaction with its id, the queue with its items
    expect((await fx.store.projection(S))?.lastState).toBe("input-required");
    expect(fx.host.live.interactions()).toEqual([interaction]);
    expect(fx.host.live.queue(S).map((i) => [i.itemId, i.text])).toEqual([
      [q1.itemId, "first queued"],
      [q2.itemId, "second queued"],
    ]);
    const parkedRows = await fx.host.call(ADMIN, "session.list", { limit: 10, parked: true });
    expect(parkedRows.sessions.map((r) => r.sessionId)).toEqual([S]);
    // a retry before the item started still answers the same item
    expect(await prompt("first queued", "q1")).toEqual(q1);

    await fx.host.call(ADMIN, "session.respond", {
      interactionId: interaction.interactionId,
      response: { outcome: "approve" },
    });
    const events = await turnEvents(fx.store, S, turnId);
    expect(events.map((e) => e.type)).toEqual([
      "turn/start",
      "user/message",
      "tool/call",
      "interaction/requested",
      "interaction/resolved",
      "tool/result",
      "assistant/delta",
      "turn/end",
    ]);
    const call = events.find((e) => e.type === "tool/call");
    expect(events.find((e) => e.type === "tool/result")).toMatchObject({
      data: { toolCallId: call?.type === "tool/call" ? call.data.toolCallId : "", ok: true },
    });
    expect(assistantText(events)).toBe("Approved: deploy");
    expect(events.at(-1)).toMatchObject({ data: { state: "completed" } });

    await vi.waitFor(
      async () => {
        const log = await readLog(fx.store, S);
        expect(userTexts(log)).toEqual(["/approve deploy", "first queued", "second queued"]);
        expect(log.filter((e) => e.type === "turn/end")).toHaveLength(3);
      },
      { timeout: 10_000 },
    );
    expect(fx.host.live.queue(S)).toEqual([]);
    // a retry after the item started answers with its turn, never the stale itemId
    const retried = await prompt("first queued", "q1");
    const log = await readLog(fx.store, S);
    const message = log.find((e) => e.type === "user/message" && e.data.text === "first queued")!;
    expect(retried).toEqual({ queued: false, seq: message.seq, turnId: expect.any(String) });
    expect(log.find((e) => e.seq === message.seq - 1)).toMatchObject({
      type: "turn/start",
      data: { turnId: retried.turnId, trigger: "queue" },
    });
  });

  test("a question parked by a restart is answered through continueTurn", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const r = await prompt("/ask colour?", "ask");
    await vi.waitFor(() => expect(fx.host.live.interactions()).toHaveLength(1), { timeout: 10_000 });
    const interaction = fx.host.live.interactions()[0]!;
    await fx.restart();
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: interaction.interactionId,
      response: { answer: "teal" },
    });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(assistantText(events)).toBe("You answered: teal");
    // the same answer again is a repeat, a different one a conflict carrying the winner
    expect(
      await fx.host.call(ADMIN, "session.respond", {
        interactionId: interaction.interactionId,
        response: { answer: "teal" },
      }),
    ).toEqual({ resolved: true });
    const conflict = await errorCode(() =>
      fx.host.call(ADMIN, "session.respond", {
        interactionId: interaction.interactionId,
        response: { answer: "red" },
      }),
    );
    expect(conflict).toMatchObject({
      code: "interaction_already_resolved",
      data: { resolution: { answer: "teal" } },
    });
  });

  test("a turn running model work is interrupted by a restart; its queued prompt then runs once", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const running = await prompt("/sleep 60000", "sleep");
    const queued = await prompt("after the restart", "after");
    expect(queued.queued).toBe(true);
    await fx.restart();
    await vi.waitFor(
      async () => {
        const log = await readLog(fx.store, S);
        expect(userTexts(log)).toEqual(["/sleep 60000", "after the restart"]);
        expect(log.filter((e) => e.type === "turn/end").map((e) => e.data)).toEqual([
          { turnId: running.turnId, state: "interrupted" },
          expect.objectContaining({ state: "completed" }),
        ]);
      },
      { timeout: 10_000 },
    );
  });

  test("cancelling a parked turn after a restart closes it and withdraws its interaction", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const { turnId, interaction } = await parkedApproval("wipe");
    await prompt("then this", "then");
    await fx.restart();
    // a parked session stays cold until asked for work; a prompt attaches it and queues behind the turn
    expect(fx.host.live.agents()).toEqual([]);
    expect(await prompt("and this", "and")).toMatchObject({ queued: true });
    expect(fx.host.live.agents().map((a) => a.sessionId)).toEqual([S]);
    expect(await fx.host.call(ADMIN, "session.cancel", { sessionId: S })).toEqual({ cancelled: true });
    const events = await turnEvents(fx.store, S, turnId);
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "cancelled" } });
    expect(fx.host.live.interactions()).toEqual([]);
    const late = await errorCode(() =>
      fx.host.call(ADMIN, "session.respond", {
        interactionId: interaction.interactionId,
        response: { outcome: "approve" },
      }),
    );
    expect(late.code).toBe("interaction_not_found");
    await vi.waitFor(
      async () =>
        expect(userTexts(await readLog(fx.store, S))).toEqual(["/approve wipe", "then this", "and this"]),
      { timeout: 10_000 },
    );
    // the cancel ends the parked turn alone: the queued prompts it frees run to completion
    await vi.waitFor(async () => {
      const ends = (await readLog(fx.store, S)).flatMap((e) => (e.type === "turn/end" ? [e.data.state] : []));
      expect(ends).toEqual(["cancelled", "completed", "completed"]);
    });
  });

  test("a parked turn is cancelled after a restart with no prompt first: the cancel attaches its agent", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const { turnId, interaction } = await parkedApproval("wipe");
    await prompt("then this", "then");
    await fx.restart();
    expect(fx.host.live.agents()).toEqual([]);
    // another principal learns nothing of it, and attaches nothing
    expect(
      await errorCode(() => fx.host.call({ name: "bob", admin: false }, "session.cancel", { sessionId: S })),
    ).toMatchObject({ code: "session_not_found", data: { sessionId: S } });
    expect(fx.host.live.agents()).toEqual([]);
    expect(await fx.host.call(ADMIN, "session.cancel", { sessionId: S })).toEqual({ cancelled: true });
    const events = await turnEvents(fx.store, S, turnId);
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "cancelled" } });
    expect(fx.host.live.interactions()).toEqual([]);
    const late = await errorCode(() =>
      fx.host.call(ADMIN, "session.respond", {
        interactionId: interaction.interactionId,
        response: { outcome: "approve" },
      }),
    );
    expect(late.code).toBe("interaction_not_found");
    // the prompt queued behind the parked turn runs once it is closed
    await vi.waitFor(async () => {
      const ends = (await readLog(fx.store, S)).flatMap((e) => (e.type === "turn/end" ? [e.data.state] : []));
      expect(ends).toEqual(["cancelled", "completed"]);
    });
    // a session with neither an agent nor a parked turn is still refused
    await fx.host.call(ADMIN, "session.create", { sessionId: "quiet" });
    await fx.restart();
    expect(
      await errorCode(() => fx.host.call(ADMIN, "session.cancel", { sessionId: "quiet" })),
    ).toMatchObject({ code: "agent_not_live", data: { sessionId: "quiet" } });
    expect(fx.host.live.agents()).toEqual([]);
  });

  test("a parked session's queue: a steer is refused and leaves it as it is, a missing item is named, another principal sees no session", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const { interaction } = await parkedApproval("hold");
    const a = await prompt("a", "a");
    const b = await prompt("b", "b");
    await fx.restart();
    expect(fx.host.live.agents()).toEqual([]);
    const update = (op: ParamsOf<"session.updateQueue">["op"], principal: Principal = ADMIN) =>
      fx.host.call(principal, "session.updateQueue", { sessionId: S, op });
    const queued = () => fx.host.live.queue(S).map((i) => i.itemId);
    // the session's queue is durable without an agent, but only its owner may touch it
    expect(await errorCode(() => update({ clear: true }, { name: "bob", admin: false }))).toMatchObject({
      code: "session_not_found",
      data: { sessionId: S },
    });
    expect(queued()).toEqual([a.itemId, b.itemId]);
    // no agent runs the parked turn to take a steer: refused, and the item stays where it is
    const refused = await errorCode(() => update({ steer: true, itemId: b.itemId! }));
    expect(refused).toEqual({ code: "agent_not_live", data: { sessionId: S } });
    expect(queued()).toEqual([a.itemId, b.itemId]);
    expect((await fx.store.queue(S)).map((i) => i.itemId)).toEqual([a.itemId, b.itemId]);
    for (const op of [
      { steer: true as const, itemId: "gone" },
      { remove: true as const, itemId: "gone" },
      { edit: true as const, itemId: "gone", text: "x" },
    ]) {
      expect(await errorCode(() => update(op))).toEqual({
        code: "queue_item_not_found",
        data: { itemId: "gone" },
      });
    }
    expect(fx.host.live.agents()).toEqual([]);
    // a prompt attaches the agent and queues behind the parked turn, which takes no steer either
    const c = await prompt("c", "c");
    expect(fx.host.live.agents().map((s) => s.sessionId)).toEqual([S]);
    expect(await errorCode(() => update({ steer: true, itemId: c.itemId! }))).toEqual({
      code: "agent_not_live",
      data: { sessionId: S },
    });
    expect(queued()).toEqual([a.itemId, b.itemId, c.itemId]);
    expect((await fx.store.queue(S)).map((i) => i.itemId)).toEqual([a.itemId, b.itemId, c.itemId]);
    // the answer continues the turn; the refused steers moved nothing and became no interjection
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: interaction.interactionId,
      response: { outcome: "approve" },
    });
    await vi.waitFor(
      async () => {
        const log = await readLog(fx.store, S);
        expect(userTexts(log)).toEqual(["/approve hold", "a", "b", "c"]);
        expect(log.filter((e) => e.type === "turn/end")).toHaveLength(4);
        expect(log.some((e) => e.type === "user/message" && e.data.interjection === true)).toBe(false);
      },
      { timeout: 10_000 },
    );
  });

  test("queue edits, removals and clears are durable", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    await parkedApproval("hold");
    const a = await prompt("a", "a");
    const b = await prompt("b", "b");
    const c = await prompt("c", "c");
    await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { edit: true, itemId: a.itemId!, text: "A" },
    });
    await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { remove: true, itemId: b.itemId! },
    });
    await fx.restart();
    expect(fx.host.live.queue(S).map((i) => [i.itemId, i.text])).toEqual([
      [a.itemId, "A"],
      [c.itemId, "c"],
    ]);
    await fx.host.call(ADMIN, "session.updateQueue", { sessionId: S, op: { clear: true } });
    await fx.restart();
    expect(fx.host.live.queue(S)).toEqual([]);
  });
});

describe("jobs in the log", () => {
  test("a job records job/started and job/ended completed; its progress is kept", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    await prompt("/job 0.2", "job");
    const log = await vi.waitFor(
      async () => {
        const events = await readLog(fx.store, S);
        expect(events.some((e) => e.type === "job/ended")).toBe(true);
        return events;
      },
      { timeout: 10_000 },
    );
    const started = log.find((e) => e.type === "job/started");
    const jobId = started?.type === "job/started" ? started.data.jobId : "";
    expect(started?.data).toMatchObject({ label: "demo job (0.2s)", turnId: expect.any(String) });
    expect(log.find((e) => e.type === "job/ended")?.data).toEqual({ jobId, state: "completed" });
    expect(fx.host.live.jobs(S)).toEqual([
      { jobId, label: "demo job (0.2s)", progress: 1, state: "completed" },
    ]);
  });

  test("a job running at shutdown ends interrupted, with its event", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    await prompt("/job 600", "job");
    await vi.waitFor(
      async () => expect((await readLog(fx.store, S)).some((e) => e.type === "job/started")).toBe(true),
      {
        timeout: 10_000,
      },
    );
    await fx.restart();
    const ended = (await readLog(fx.store, S)).filter((e) => e.type === "job/ended");
    expect(ended.map((e) => e.data)).toEqual([{ jobId: expect.any(String), state: "interrupted" }]);
  });

  test("a job a crashed process left running is ended interrupted at start", async () => {
    fx = await openHost();
    // what a crash leaves behind: a job started, never ended
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    await fx.store.append(S, [
      { type: "job/started", data: { jobId: "j-lost", label: "lost", turnId: "t" } },
    ]);
    await fx.restart();
    const log = await readLog(fx.store, S);
    expect(log.at(-1)).toMatchObject({ type: "job/ended", data: { jobId: "j-lost", state: "interrupted" } });
    // only once: a second restart finds nothing running
    await fx.restart();
    expect((await readLog(fx.store, S)).filter((e) => e.type === "job/ended")).toHaveLength(1);
  });
});
