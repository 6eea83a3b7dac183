import { afterEach, expect, test, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { Limits } from "../../protocol/limits.js";
import type { AgentDriver } from "../../src/agents/agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { readReachedHead } from "../../src/store/read-head.js";
import {
  assistantText,
  demoAgentWith,
  type HostFixture,
  openHost,
  readLog,
  turnEvents,
} from "./host-fixture.js";

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "history";

test("an agent's history is the whole log when its data is several times a read's budget", async () => {
  const agent = demoAgentWith("reader", async (turn) => {
    if (turn.prompt.text === "fill") {
      // 2.8 MiB of tool results, each under the event limit: the store reads them in parts
      for (let i = 0; i < 4; i++) {
        await turn.emit({ type: "tool/call", toolCallId: `c${i}`, name: "cat", args: { i } });
        await turn.emit({
          type: "tool/result",
          toolCallId: `c${i}`,
          ok: true,
          result: String(i).repeat(0.7 * Limits.maxEventBytes),
          durationMs: 1,
        });
      }
      return { state: "completed" };
    }
    const history = await turn.history();
    const seqs = history.map((e) => e.seq);
    const contiguous = seqs.every((seq, i) => seq === i + 1);
    await turn.emit({ type: "assistant/delta", text: `${seqs.length} ${seqs.at(-1)} ${contiguous}` });
    return { state: "completed" };
  });
  fx = await openHost({ agent });
  await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
  const fill = await fx.host.call(ADMIN, "session.prompt", {
    sessionId: S,
    text: "fill",
    clientMessageId: "a",
  });
  await turnEvents(fx.store, S, fill.turnId!);
  const count = await fx.host.call(ADMIN, "session.prompt", {
    sessionId: S,
    text: "count",
    clientMessageId: "b",
  });
  const events = await turnEvents(fx.store, S, count.turnId!);
  // the history ends at the prompt it answers: everything committed before the agent read it
  const prompt = events.find((e) => e.type === "user/message")!;
  expect(assistantText(events)).toBe(`${prompt.seq} ${prompt.seq} true`);
  const log = await readLog(fx.store, S);
  expect(log.filter((e) => e.type === "tool/result")).toHaveLength(4);
});

/** Fills session `S` with `count` tool results of `bytes` each, in one turn of the agent below. */
async function fillTurn(turn: Parameters<AgentDriver["runTurn"]>[0], count: number, bytes: number) {
  for (let i = 0; i < count; i++) {
    await turn.emit({ type: "tool/call", toolCallId: `c${i}`, name: "cat", args: { i } });
    await turn.emit({
      type: "tool/result",
      toolCallId: `c${i}`,
      ok: true,
      result: String(i % 10).repeat(bytes),
      durationMs: 1,
    });
  }
}

/**
 * An agent whose "fill N" turn writes N results of 600 KiB and whose other turns read
 * `turn.history()`, counting the store reads it makes and the event-loop turns run between them.
 */
function historyReader() {
  const seen = { reads: 0, ticksAtRead: [] as number[], code: "", count: -1 };
  let counting = false;
  let readDone = () => {};
  // the test polls the log only once the agent's read is over, so every read counted is the agent's
  const read = new Promise<void>((resolve) => {
    readDone = resolve;
  });
  let ticks = 0;
  let ticking = true;
  const tick = () => {
    ticks++;
    if (ticking) setImmediate(tick);
  };
  const agent = demoAgentWith("reader", async (turn) => {
    const fill = /^fill (\d+)$/.exec(turn.prompt.text);
    if (fill) {
      await fillTurn(turn, Number(fill[1]), 600 * 1024);
      return { state: "completed" };
    }
    counting = true;
    try {
      const history = await turn.history();
      seen.count = history.length;
    } catch (err) {
      seen.code = (err as { code?: string }).code ?? "none";
      throw err;
    } finally {
      counting = false;
      readDone();
    }
    return { state: "completed" };
  });
  const watch = (store: HostFixture["store"]) => {
    const read = store.readAfter.bind(store);
    vi.spyOn(store, "readAfter").mockImplementation((...args) => {
      if (counting) {
        seen.reads++;
        seen.ticksAtRead.push(ticks);
      }
      return read(...args);
    });
    setImmediate(tick);
  };
  const stop = () => {
    ticking = false;
  };
  return { agent, seen, watch, read, stop };
}

async function prompt(text: string, key: string, before?: Promise<void>): Promise<SessionEvent[]> {
  const started = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: key });
  await before;
  return turnEvents(fx.store, S, started.turnId!);
}

/** Reads of 1,000 events that take the whole log, as `turn.history()` makes them. */
async function wholeLogReads(): Promise<number> {
  let reads = 0;
  for (let after = 0; ; ) {
    const outcome = await fx.store.readAfter(S, after, 1000);
    if (outcome.status !== "ok") throw new Error(outcome.status);
    reads++;
    if (readReachedHead(outcome)) return reads;
    after = outcome.events.at(-1)!.seq;
  }
}

test("turn.history() holds at most the transcript bound: past it the turn fails transcript_too_large, its reads stopped", async () => {
  const reader = historyReader();
  fx = await openHost({ agent: reader.agent, maxTranscriptBytes: 2 * 1024 * 1024 });
  await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
  reader.watch(fx.store);
  try {
    await prompt("fill 9", "a"); // 5.3 MiB of results
    const events = await prompt("count", "b", reader.read);
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "failed" } });
    const end = events.at(-1) as Extract<SessionEvent, { type: "turn/end" }>;
    expect(end.data.error).toContain(`more than ${2 * 1024 * 1024} bytes of event data`);
    expect(reader.seen.code).toBe("transcript_too_large");
    expect(reader.seen.count).toBe(-1);
    // it stopped at the read that passed 2 MiB (reads of 1 MiB, results of 0.6 MiB: the second
    // one); the whole log takes 5
    expect(reader.seen.reads).toBe(2);
    expect(await wholeLogReads()).toBe(5);
    // nothing of the log changed: the nine results are all there
    expect((await readLog(fx.store, S)).filter((e) => e.type === "tool/result")).toHaveLength(9);
  } finally {
    reader.stop();
  }
});

test("turn.history() of a log of many reads lets the event loop run between them", async () => {
  const reader = historyReader();
  fx = await openHost({ agent: reader.agent });
  await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
  reader.watch(fx.store);
  try {
    await prompt("fill 12", "a"); // 7 MiB of results, under the default bound of 32 MiB
    const events = await prompt("count", "b", reader.read);
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
    const prompted = events.find((e) => e.type === "user/message")!;
    expect(reader.seen.count).toBe(prompted.seq);
    expect(reader.seen.reads).toBe(await wholeLogReads());
    expect(reader.seen.reads).toBeGreaterThanOrEqual(4);
    const ticks = reader.seen.ticksAtRead;
    for (let i = 1; i < ticks.length; i++) expect(ticks[i]!).toBeGreaterThan(ticks[i - 1]!);
  } finally {
    reader.stop();
  }
});
