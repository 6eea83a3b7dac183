import { afterEach, describe, expect, test, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { DemoAgent, splitEcho } from "../../src/agents/demo-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import {
  assistantText,
  beforeAppend,
  type HostFixture,
  openHost,
  readLog,
  turnEvents,
} from "../host/host-fixture.js";
import { readWholeLog } from "../support/whole-log.js";

/** The demo agent driven through a real host and store: the commands the console and scripts rely on. */

let fx: HostFixture;
afterEach(async () => {
  vi.useRealTimers();
  await fx?.dispose();
});

const S = "demo";
let n = 0;

async function run(text: string): Promise<SessionEvent[]> {
  const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: `m${++n}` });
  return turnEvents(fx.store, S, r.turnId!);
}

async function start(model?: string): Promise<void> {
  fx = await openHost();
  await fx.host.call(ADMIN, "session.create", { sessionId: S, ...(model ? { model } : {}) });
}

const types = (events: SessionEvent[]) => events.map((e) => e.type);
const endOf = (events: SessionEvent[]) => events.at(-1)?.data;
const deltas = (events: SessionEvent[]) =>
  events.flatMap((e) => (e.type === "assistant/delta" ? [e.data.text] : []));
const ended = (log: SessionEvent[]) => log.some((e) => e.type === "turn/end");

/**
 * Reads the log between event-loop turns until `check` holds. No timer: in the tests that fake
 * `setTimeout` the agent's waits only pass when the test advances the clock, and `vi.waitFor`
 * would advance it.
 */
async function logUntil(check: (log: SessionEvent[]) => boolean): Promise<SessionEvent[]> {
  for (let round = 0; round < 5_000; round++) {
    const log = await readLog(fx.store, S);
    if (check(log)) return log;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error("the log never reached the expected state");
}

/** The agent is waiting on a timer of its own, or its turn has ended. */
const waitingOrEnded = (log: SessionEvent[]) => vi.getTimerCount() > 0 || ended(log);

/** The approval or question the open turn waits on, polled without a timer. */
async function pendingInteraction() {
  await logUntil((log) => log.some((e) => e.type === "interaction/requested"));
  const [interaction] = fx.host.live.interactions();
  if (!interaction) throw new Error("no interaction pending");
  return interaction;
}

async function prompted(text: string): Promise<void> {
  await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: `m${++n}` });
}

describe("DemoAgent", () => {
  test("offers demo-fast (default) and demo-careful", () => {
    const agent = new DemoAgent();
    expect(agent.name).toBe("demo");
    expect(agent.defaultModel).toBe("demo-fast");
    // the labels are what the console's model picker shows
    expect(agent.models()).toEqual([
      { id: "demo-fast", label: "Demo (fast)" },
      { id: "demo-careful", label: "Demo (careful, shows reasoning)" },
    ]);
  });

  test("plain text is echoed in the same 3 or 4 deltas every time, with no reasoning, then completed", async () => {
    await start();
    const events = await run("the quick brown fox");
    expect(types(events)).toEqual([
      "turn/start",
      "user/message",
      ...Array(4).fill("assistant/delta"),
      "turn/end",
    ]);
    expect(deltas(events)).toEqual(["Echo: t", "he quic", "k brown", " fox"]);
    expect(endOf(events)).toMatchObject({ state: "completed" });
    // a reply whose length the chunk size divides ends on its last chunk, with no empty one after
    expect(deltas(await run("abcdef"))).toEqual(["Ech", "o: ", "abc", "def"]);
  });

  test("splitEcho cuts a reply into 3 or 4 non-empty chunks that join back to it", () => {
    expect(splitEcho("Echo: ")).toEqual(["Ec", "ho", ": "]);
    expect(splitEcho("Echo: ab")).toEqual(["Ec", "ho", ": ", "ab"]);
    expect(splitEcho("Echo: abc")).toEqual(["Ech", "o: ", "abc"]);
    for (const reply of ["Echo: ", "Echo: x", "Echo: 12345678", `Echo: ${"y".repeat(101)}`]) {
      const chunks = splitEcho(reply);
      expect(chunks.join("")).toBe(reply);
      expect(chunks.length).toBeGreaterThanOrEqual(3);
      expect(chunks.length).toBeLessThanOrEqual(4);
      expect(chunks.every((c) => c.length > 0)).toBe(true);
    }
  });

  test("demo-careful adds a reasoning delta before the echo", async () => {
    await start("demo-careful");
    const events = await run("think");
    expect(types(events).slice(0, 3)).toEqual(["turn/start", "user/message", "reasoning/delta"]);
    expect(events[2]?.data).toMatchObject({ text: "Echoing the prompt." });
    expect(assistantText(events)).toBe("Echo: think");
  });

  test("/stream N ms streams N ordered chunks", async () => {
    await start();
    const events = await run("/stream 7 2");
    expect(
      events
        .filter((e) => e.type === "assistant/delta")
        .map((e) => e.type === "assistant/delta" && e.data.text),
    ).toEqual(Array.from({ length: 7 }, (_, i) => `chunk ${i + 1} `));
    expect(endOf(events)).toMatchObject({ state: "completed" });
  });

  test("/stream N ms waits ms between chunks, not before the first; /stream N 0 never waits", async () => {
    await start();
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    await prompted("/stream 3 1000");
    expect(deltas(await logUntil(waitingOrEnded))).toEqual(["chunk 1 "]);
    await vi.advanceTimersByTimeAsync(999);
    expect(deltas(await readLog(fx.store, S))).toEqual(["chunk 1 "]);
    await vi.advanceTimersByTimeAsync(1);
    await logUntil((log) => deltas(log).length === 2 && waitingOrEnded(log));
    await vi.advanceTimersByTimeAsync(1000);
    expect(deltas(await logUntil(ended))).toEqual(["chunk 1 ", "chunk 2 ", "chunk 3 "]);

    const before = (await readLog(fx.store, S)).length;
    await prompted("/stream 3 0");
    const log = (await logUntil((all) => all.length > before && waitingOrEnded(all.slice(before)))).slice(
      before,
    );
    expect(ended(log)).toBe(true);
    expect(deltas(log)).toEqual(["chunk 1 ", "chunk 2 ", "chunk 3 "]);
  });

  test("/approve: tool/call, approval (input-required), approve → tool/result ok, deny → not ok; both complete", async () => {
    await start();
    for (const outcome of ["approve", "deny"] as const) {
      const r = await fx.host.call(ADMIN, "session.prompt", {
        sessionId: S,
        text: "/approve rm -rf build",
        clientMessageId: outcome,
      });
      const interaction = await vi.waitFor(async () => {
        expect((await fx.store.projection(S))?.lastState).toBe("input-required");
        return fx.host.live.interactions()[0]!;
      });
      expect(interaction).toMatchObject({ kind: "approval", action: "rm -rf build" });
      await fx.host.call(ADMIN, "session.respond", {
        interactionId: interaction.interactionId,
        response: { outcome },
      });
      const events = await turnEvents(fx.store, S, r.turnId!);
      expect(types(events)).toEqual([
        "turn/start",
        "user/message",
        "tool/call",
        "interaction/requested",
        "interaction/resolved",
        "tool/result",
        "assistant/delta",
        "turn/end",
      ]);
      const call = events[2]!;
      const result = events[5]!;
      expect(call.data).toMatchObject({ name: "demo.action", args: { action: "rm -rf build" } });
      expect(result.data).toMatchObject({
        toolCallId: (call.data as { toolCallId: string }).toolCallId,
        ok: outcome === "approve",
        result:
          outcome === "approve"
            ? { action: "rm -rf build", done: true }
            : { action: "rm -rf build", denied: true },
      });
      expect(assistantText(events)).toBe(
        outcome === "approve" ? "Approved: rm -rf build" : "Denied: rm -rf build",
      );
      expect(endOf(events)).toMatchObject({ state: "completed" });
    }
  });

  test("/job reports progress in the background while the turn ends at once", async () => {
    await start();
    const progress: number[] = [];
    fx.host.live.subscribe((d) => {
      if (d.kind === "jobs" && d.jobs[0]) progress.push(d.jobs[0].progress);
    });
    const events = await run("/job 0.2");
    expect(endOf(events)).toMatchObject({ state: "completed" });
    await vi.waitFor(() => expect(fx.host.live.jobs(S)[0]?.state).toBe("completed"));
    expect(progress).toEqual([0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]);
  });

  test("/approve: the tool result's duration is the time from the request to the answer", async () => {
    await start();
    vi.useFakeTimers({ toFake: ["Date"] });
    const asked = Date.now();
    await prompted("/approve deploy");
    const interaction = await pendingInteraction();
    vi.setSystemTime(asked + 1234);
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: interaction.interactionId,
      response: { outcome: "approve" },
    });
    const result = (await logUntil(ended)).find((e) => e.type === "tool/result");
    expect(result?.data).toMatchObject({ ok: true, durationMs: 1234 });
  });

  test("prompts steered while it waits for an answer are all noted, in order, in its next delta", async () => {
    await start();
    await prompted("/approve deploy");
    const interaction = await pendingInteraction();
    for (const text of ["first", "second"]) {
      const queued = await fx.host.call(ADMIN, "session.prompt", {
        sessionId: S,
        text,
        clientMessageId: text,
      });
      await fx.host.call(ADMIN, "session.updateQueue", {
        sessionId: S,
        op: { steer: true, itemId: queued.itemId! },
      });
    }
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: interaction.interactionId,
      response: { outcome: "approve" },
    });
    const log = await logUntil(ended);
    expect(deltas(log)).toEqual(["[noted: first] [noted: second] Approved: deploy"]);
  });

  test("/job N says which job it started and completes it after N seconds, in ten steps", async () => {
    await start();
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    await prompted("/job 1");
    const log = await logUntil(ended);
    const [job] = fx.host.live.jobs(S);
    expect(deltas(log)).toEqual([`Started job ${job?.jobId}`]);
    await vi.advanceTimersByTimeAsync(900);
    expect(fx.host.live.jobs(S)[0]).toMatchObject({ state: "running", progress: 0.9 });
    await vi.advanceTimersByTimeAsync(100);
    await logUntil((all) => all.some((e) => e.type === "job/ended"));
    expect(fx.host.live.jobs(S)[0]).toMatchObject({ state: "completed", progress: 1 });
  });

  test("a store write failing under its reply ends the turn failed with that error, not cancelled", async () => {
    await start();
    const echo = beforeAppend(
      fx.store,
      (events) => events[0]?.type === "assistant/delta",
      async () => {
        throw new Error("disk I/O error");
      },
    );
    const events = await run("hello");
    expect(echo.ran).toBe(true);
    expect(endOf(events)).toEqual({ turnId: expect.any(String), state: "failed", error: "disk I/O error" });
  });

  test("the same, when it finishes a turn parked by a restart (continueTurn)", async () => {
    await start();
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/ask colour?",
      clientMessageId: "q",
    });
    const interaction = await pendingInteraction();
    await fx.restart();
    const answer = beforeAppend(
      fx.store,
      (events) => events[0]?.type === "assistant/delta",
      async () => {
        throw new Error("disk I/O error");
      },
    );
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: interaction.interactionId,
      response: { answer: "teal" },
    });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(answer.ran).toBe(true);
    expect(endOf(events)).toEqual({ turnId: r.turnId, state: "failed", error: "disk I/O error" });
  });

  test("/fail ends the turn failed with an error", async () => {
    await start();
    const events = await run("/fail");
    expect(endOf(events)).toEqual({
      turnId: expect.any(String),
      state: "failed",
      error: expect.stringContaining("/fail"),
    });
    expect((await fx.store.projection(S))?.lastState).toBe("failed");
  });

  test("/sleep completes after the wait; cancel during it ends the turn cancelled", async () => {
    await start();
    const slept = await run("/sleep 20");
    expect(assistantText(slept)).toBe("Slept 20 ms");
    expect(endOf(slept)).toMatchObject({ state: "completed" });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/sleep 60000",
      clientMessageId: "long",
    });
    expect(await fx.host.call(ADMIN, "session.cancel", { sessionId: S })).toEqual({ cancelled: true });
    const cancelled = await turnEvents(fx.store, S, r.turnId!);
    expect(types(cancelled)).toEqual(["turn/start", "user/message", "turn/end"]);
    expect(endOf(cancelled)).toMatchObject({ state: "cancelled" });
  });

  test("/stream is cancelled mid-way without further deltas after turn/end", async () => {
    await start();
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/stream 1000 5",
      clientMessageId: "s",
    });
    await vi.waitFor(async () => {
      const out = await fx.store.readAfter(S, 0, 100);
      expect(
        out.status === "ok" && out.events.filter((e) => e.type === "assistant/delta").length,
      ).toBeGreaterThan(2);
    });
    await fx.host.call(ADMIN, "session.cancel", { sessionId: S });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(endOf(events)).toMatchObject({ state: "cancelled" });
    await vi.waitFor(() => expect(fx.host.live.isRunning(S)).toBe(false));
    const all = await readWholeLog(fx.store, S);
    expect(all.status === "ok" && all.events.at(-1)?.type).toBe("turn/end");
  });
});
