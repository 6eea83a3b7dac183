import { afterEach, describe, expect, test, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import type { AgentDriver, TurnContext, TurnOutcome } from "../../src/agents/agent.js";
import type { ControlDelta } from "../../src/host/live/live-state.js";
import { TurnEnded, TurnStopped } from "../../src/host/live-session.js";
import { ADMIN } from "../../src/host/principal.js";
import { gate } from "../support/gate.js";
import { capturedLogger } from "../support/log-capture.js";
import {
  beforeAppend,
  demoAgentWith,
  errorCode,
  type HostFixture,
  heldAgent,
  openHost,
  readLog,
  turnEvents,
} from "./host-fixture.js";

/** How the turn runner opens, closes and hands on turns when the store or the agent answers unusually. */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "runner";

const prompt = (text: string, clientMessageId = text.replace(/[^A-Za-z0-9_-]/g, "-")) =>
  fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId });

const userTexts = (log: SessionEvent[]) =>
  log.flatMap((e) => (e.type === "user/message" ? [e.data.text] : []));
const turnEnds = (log: SessionEvent[]) => log.flatMap((e) => (e.type === "turn/end" ? [e.data] : []));

async function waitForTurnEnds(count: number): Promise<SessionEvent[]> {
  return vi.waitFor(
    async () => {
      const log = await readLog(fx.store, S);
      expect(turnEnds(log)).toHaveLength(count);
      return log;
    },
    { timeout: 10_000, interval: 10 },
  );
}

describe("a failed turn", () => {
  test("records what failed: a thrown value as text, an Error's name when its message is empty, 'turn failed' when nothing is said; the owner is told each", async () => {
    const agent = demoAgentWith("failing", async (turn) => {
      switch (turn.prompt.text) {
        case "thrown string":
          throw "plain words";
        case "empty Error":
          throw new Error("");
        case "empty TypeError":
          throw new TypeError("");
        case "Error":
          throw new Error("said so");
        case "failed, silent":
          return { state: "failed", error: "" };
        case "fine":
          return { state: "completed" };
        default:
          return { state: "failed", error: "quota" };
      }
    });
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const told: string[] = [];
    fx.host.subscribeNotifications(ADMIN, (n) => {
      if (n.name === "agent.error") told.push(n.value.message);
    });
    const fine = await prompt("fine");
    expect((await turnEvents(fx.store, S, fine.turnId!)).at(-1)?.data).toEqual({
      turnId: fine.turnId,
      state: "completed",
    });
    const ends: unknown[] = [];
    for (const text of [
      "thrown string",
      "empty Error",
      "empty TypeError",
      "Error",
      "failed, silent",
      "failed",
    ]) {
      const r = await prompt(text);
      ends.push((await turnEvents(fx.store, S, r.turnId!)).at(-1)?.data);
    }
    // the completed turn told nobody anything
    const errors = ["plain words", "Error", "TypeError", "said so", "turn failed", "quota"];
    expect(ends).toEqual(errors.map((error) => ({ turnId: expect.any(String), state: "failed", error })));
    await vi.waitFor(() => expect(told).toEqual(errors));
  });
});

describe("an agent that resolves with no outcome", () => {
  test("(plain JavaScript: nothing, null, an unknown state) has its turn end failed, and the host runs on", async () => {
    const agent = demoAgentWith("careless", async (turn) => {
      if (turn.prompt.text === "nothing") return undefined as unknown as TurnOutcome;
      if (turn.prompt.text === "null") return null as unknown as TurnOutcome;
      if (turn.prompt.text === "done") return { state: "done" } as unknown as TurnOutcome;
      if (turn.prompt.text === "gave up") return { state: "cancelled" };
      if (turn.prompt.text === "numbered") return { state: "failed", error: 42 } as unknown as TurnOutcome;
      if (turn.prompt.text === "error object")
        return { state: "failed", error: new Error("quota") } as unknown as TurnOutcome;
      return { state: "completed" };
    });
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    for (const [text, got] of [
      ["nothing", "undefined"],
      ["null", "null"],
      ["done", '{"state":"done"}'],
    ]) {
      const r = await prompt(text!);
      expect((await turnEvents(fx.store, S, r.turnId!)).at(-1)?.data).toEqual({
        turnId: r.turnId,
        state: "failed",
        error: `the agent returned no turn outcome (${got}); runTurn resolves with { state: "completed" | "failed" | "cancelled", error? }`,
      });
    }
    // an error that is no string was recorded as it was, a turn/end its schema refuses
    for (const [text, error] of [
      ["numbered", "42"],
      ["error object", "quota"],
    ]) {
      const r = await prompt(text!);
      expect((await turnEvents(fx.store, S, r.turnId!)).at(-1)?.data).toEqual({
        turnId: r.turnId,
        state: "failed",
        error,
      });
    }
    // each outcome state an agent may give is kept as it is
    for (const [text, state] of [
      ["gave up", "cancelled"],
      ["fine", "completed"],
    ]) {
      const r = await prompt(text!);
      expect((await turnEvents(fx.store, S, r.turnId!)).at(-1)?.data).toEqual({ turnId: r.turnId, state });
    }
  });
});

describe("opening a turn meets a store that changed since the host looked", () => {
  test("a prompt another writer queued under the same key in between answers that writer's record; its item then runs once, from the queue", async () => {
    fx = await openHost();
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    beforeAppend(
      fx.store,
      (_events, options) => options?.prompt !== undefined,
      async () => {
        const other = await fx.store.enqueuePrompt({
          sessionId: S,
          itemId: "queued-elsewhere",
          queuedAt: Date.now(),
          input: { clientMessageId: "k", text: "raced" },
        });
        expect(other.status).toBe("queued");
      },
    );
    expect(await prompt("raced", "k")).toEqual({ queued: true, itemId: "queued-elsewhere" });
    const log = await waitForTurnEnds(1);
    const starts = log.flatMap((e) => (e.type === "turn/start" ? [e.data.trigger] : []));
    expect(starts).toEqual(["queue"]);
    expect(userTexts(log)).toEqual(["raced"]);
    expect(fx.host.live.queue(S)).toEqual([]);
  });

  test("a queued prompt edited between its choice and its append runs with its new text, as the edit answered", async () => {
    const { agent, release } = heldAgent();
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    await prompt("wait");
    const queued = await prompt("old text");
    let edited: unknown;
    beforeAppend(
      fx.store,
      (_events, options) => options?.dequeue?.itemId === queued.itemId,
      async () => {
        edited = await fx.host.call(ADMIN, "session.updateQueue", {
          sessionId: S,
          op: { edit: true, itemId: queued.itemId!, text: "new text" },
        });
      },
    );
    release();
    const events = await waitForTurnEnds(2);
    expect(edited).toEqual({
      items: [{ itemId: queued.itemId, text: "new text", queuedAt: expect.any(Number) }],
    });
    // before, "old text": the start had read the item before the edit and took it whatever it held
    expect(userTexts(events)).toEqual(["wait", "new text"]);
    expect(fx.host.live.queue(S)).toEqual([]);
  });

  test("a queued prompt removed between its choice and its append starts nothing and warns nobody; the next one runs", async () => {
    const log = capturedLogger();
    const { agent, release } = heldAgent();
    fx = await openHost({ agent, logger: log.logger });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    await prompt("wait");
    const gone = await prompt("gone");
    expect(await prompt("next")).toMatchObject({ queued: true });
    beforeAppend(
      fx.store,
      (_events, options) => options?.dequeue?.itemId === gone.itemId,
      async () => {
        expect((await fx.store.removeQueueItem(S, gone.itemId!)).status).toBe("ok");
      },
    );
    release();
    const events = await waitForTurnEnds(2);
    expect(userTexts(events)).toEqual(["wait", "next"]);
    expect(turnEnds(events).map((e) => e.state)).toEqual(["completed", "completed"]);
    expect(fx.host.live.queue(S)).toEqual([]);
    expect(log.lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
  });

  test("a session deleted between the prompt's check and its append refuses it session_retired; no agent runs", async () => {
    let ran = 0;
    const agent = demoAgentWith("counting", async () => {
      ran++;
      return { state: "completed" };
    });
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    beforeAppend(
      fx.store,
      (events) => events[0]?.type === "turn/start",
      async () => {
        expect((await fx.store.delete(S)).status).toBe("deleted");
      },
    );
    expect((await errorCode(() => prompt("too late"))).code).toBe("session_retired");
    expect(ran).toBe(0);
  });
});

describe("between one turn and the next", () => {
  test("the agent is not reported idle while a prompt is still being queued: running through to the queued turn, idle once after it", async () => {
    const { agent, release } = heldAgent();
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const states: string[] = [];
    fx.host.live.subscribe((d: ControlDelta) => {
      if (d.kind === "agent" && d.sessionId === S) states.push(d.state);
    });
    const first = await prompt("wait");
    // the second prompt's queue write is held until the first turn is over
    const enqueue = fx.store.enqueuePrompt.bind(fx.store);
    const entered = gate();
    const held = gate();
    vi.spyOn(fx.store, "enqueuePrompt").mockImplementation(async (input) => {
      entered.open();
      await held.promise;
      return enqueue(input);
    });
    const second = prompt("queued while the turn ended");
    await entered.promise;
    release();
    await turnEvents(fx.store, S, first.turnId!);
    // the first turn's release runs in microtasks after its turn/end commits
    await new Promise((resolve) => setImmediate(resolve));
    expect(states).not.toContain("idle");
    held.open();
    expect(await second).toMatchObject({ queued: true });
    const log = await waitForTurnEnds(2);
    expect(userTexts(log)).toEqual(["wait", "queued while the turn ended"]);
    await vi.waitFor(() => expect(states.at(-1)).toBe("idle"));
    expect(states).toEqual(["attached", "running", "idle"]);
  });

  test("a steer after the agent returned, before its turn/end commits, leaves the queue's order alone; the items run in it", async () => {
    const { agent } = heldAgent();
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const closing = gate();
    const held = gate();
    beforeAppend(
      fx.store,
      (events) => events[0]?.type === "turn/end",
      async () => {
        closing.open();
        await held.promise;
      },
    );
    await prompt("first");
    await closing.promise;
    const c = await prompt("c");
    const b = await prompt("b");
    const { items } = await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { steer: true, itemId: b.itemId! },
    });
    expect(items.map((i) => i.itemId)).toEqual([c.itemId, b.itemId]);
    held.open();
    const log = await waitForTurnEnds(3);
    expect(userTexts(log)).toEqual(["first", "c", "b"]);
    expect(log.filter((e) => e.type === "user/message" && e.data.interjection)).toEqual([]);
  });
});

describe("cancel", () => {
  /** An agent whose "run" turns, and every continued turn, wait until their signal aborts. */
  function abortableAgent() {
    const seen: { prompt: TurnContext["prompt"]; reason: unknown }[] = [];
    const entered = gate();
    const untilAborted = async (turn: TurnContext) => {
      const record = { prompt: turn.prompt, reason: undefined as unknown };
      seen.push(record);
      entered.open();
      await new Promise((resolve) => turn.signal.addEventListener("abort", resolve));
      record.reason = turn.signal.reason;
      return { state: "cancelled" as const };
    };
    const agent: AgentDriver = {
      ...demoAgentWith("abortable", (turn, demo) =>
        turn.prompt.text === "run" ? untilAborted(turn) : demo.runTurn(turn),
      ),
      continueTurn: (turn) => untilAborted(turn),
    };
    return { agent, seen, entered: entered.promise };
  }

  const stoppedBy = (reason: unknown) => (reason instanceof TurnStopped ? reason.stop : reason);

  test("of a running turn stops its agent: the signal aborts with the reason cancel, the turn ends cancelled once", async () => {
    const abortable = abortableAgent();
    fx = await openHost({ agent: abortable.agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const running = await prompt("run");
    await abortable.entered;
    expect(await fx.host.call(ADMIN, "session.cancel", { sessionId: S })).toEqual({ cancelled: true });
    await waitForTurnEnds(1);
    expect(abortable.seen.map((s) => stoppedBy(s.reason))).toEqual(["cancel"]);
    expect(turnEnds(await readLog(fx.store, S))).toEqual([{ turnId: running.turnId, state: "cancelled" }]);
  });

  test("of a parked turn continued after its answers stops the continuing agent, which was given an empty prompt", async () => {
    const abortable = abortableAgent();
    fx = await openHost({ agent: abortable.agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const asked = await prompt("/ask proceed?");
    await vi.waitFor(() => expect(fx.host.live.interactions()).toHaveLength(1));
    await fx.restart();
    const [question] = fx.host.live.interactions();
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: question!.interactionId,
      response: { answer: "yes" },
    });
    await abortable.entered;
    expect(await fx.host.call(ADMIN, "session.cancel", { sessionId: S })).toEqual({ cancelled: true });
    await waitForTurnEnds(1);
    expect(abortable.seen).toEqual([
      { prompt: { text: "", attachments: [] }, reason: expect.any(TurnStopped) },
    ]);
    expect(stoppedBy(abortable.seen[0]!.reason)).toBe("cancel");
    expect(turnEnds(await readLog(fx.store, S))).toEqual([{ turnId: asked.turnId, state: "cancelled" }]);
  });
});

describe("an agent that keeps its turn's context past its return", () => {
  test("writes nothing more for that turn: an emit, an interaction or a job after its turn/end is refused TurnEnded, and a restart parks nothing on it", async () => {
    let kept: TurnContext | undefined;
    const agent = demoAgentWith("keeps", async (turn) => {
      kept ??= turn;
      return { state: "completed" };
    });
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    await prompt("first");
    const closed = await waitForTurnEnds(1);
    const late = kept!;

    // before, the delta and the question landed after the turn's end, the question stayed pending
    // on a closed turn for ever, and a restart parked the session behind it
    await expect(late.emit({ type: "assistant/delta", text: "late" })).rejects.toBeInstanceOf(TurnEnded);
    let asked: unknown = "unsettled";
    late.requestInteraction({ kind: "approval", action: "late" }).then(
      () => {
        asked = "answered";
      },
      (err: unknown) => {
        asked = err;
      },
    );
    await vi.waitFor(() => expect(asked).toBeInstanceOf(TurnEnded));
    expect(() => late.startJob("late")).toThrow(TurnEnded);
    expect(await readLog(fx.store, S)).toEqual(closed);
    expect(fx.host.live.interactions()).toEqual([]);
    expect(fx.host.live.jobs(S)).toEqual([]);

    await fx.restart();
    expect(await prompt("second")).toMatchObject({ queued: false });
    expect(userTexts(await waitForTurnEnds(2))).toEqual(["first", "second"]);
  });
});
