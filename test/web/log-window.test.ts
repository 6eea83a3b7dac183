import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { applyEvents, emptyTranscript, type TranscriptState } from "../../protocol/transcript.js";
import { LogWindow, type TranscriptSeed } from "../../web/src/log-window.js";

/** A small seeded generator, so every log is the same on every run. */
function random(seed: number): (n: number) => number {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

interface LogShape {
  turns: number;
  /** Out of 10: how often a job outlives its turn, to end turns later. */
  jobsOutliveTurns: number;
  /** A turn starts before the one before it ended, which ends later (a host that stopped late). */
  overlapping: boolean;
  /** An answer to a card of the previous turn comes after the next turn started. */
  lateAnswers: boolean;
}

/**
 * A log of every event type the fold reads: renames and model changes between and inside turns,
 * prompts (hidden, sent on a person's behalf, interjected), output, reasoning, tool calls with and
 * without results, cards answered, left open and closed by their turn's end, jobs ending in their
 * turn or turns later or never, events of a type from a newer host, turns ending every way, and
 * the last turn left open with a card waiting.
 */
function syntheticLog(seed: number, shape: LogShape): SessionEvent[] {
  const pick = random(seed);
  const log: SessionEvent[] = [];
  const add = (type: string, data: unknown) =>
    log.push({ seq: log.length + 1, at: 1_000 + log.length * 7, type, data } as SessionEvent);
  add("session/created", { title: "start", model: "m0", ...(pick(2) ? { origin: "cli" } : {}) });
  const running: string[] = [];
  let openCard: { id: string; turnId: string } | undefined;
  let lateTurn: string | undefined;
  for (let t = 1; t <= shape.turns; t++) {
    const turnId = `turn-${t}`;
    if (pick(4) === 0) add("session/renamed", { title: `title ${t}` });
    if (pick(5) === 0) add("session/model", { model: `m${t}` });
    add("turn/start", { turnId, trigger: pick(3) ? "prompt" : "queue" });
    if (lateTurn !== undefined && pick(3) === 0) {
      add("turn/end", { turnId: lateTurn, state: "interrupted" });
      lateTurn = undefined;
    }
    if (openCard && shape.lateAnswers) {
      add("interaction/resolved", { interactionId: openCard.id, resolution: { answer: "late" } });
      openCard = undefined;
    }
    const hidden = pick(6) === 0;
    add("user/message", {
      messageId: `msg-${t}`,
      source: "user",
      text: `prompt ${t}`,
      attachments: [],
      meta: hidden ? { origin: "scheduler" } : {},
    });
    const steps = 1 + pick(8);
    for (let s = 0; s < steps; s++) {
      switch (pick(11)) {
        case 0:
          add("reasoning/delta", { turnId, text: `thinking ${s}` });
          break;
        case 1: {
          const toolCallId = `tool-${t}-${s}`;
          add("tool/call", { turnId, toolCallId, name: "read", args: { s } });
          if (pick(4))
            add("tool/result", { turnId, toolCallId, ok: pick(2) === 0, result: s, durationMs: 3 });
          break;
        }
        case 2: {
          const interactionId = `card-${t}-${s}`;
          add("interaction/requested", {
            turnId,
            interactionId,
            kind: pick(2) ? "approval" : "question",
            ...(pick(2) ? { action: "run" } : { question: "which?", options: ["a", "b"] }),
          });
          if (pick(3)) {
            add("interaction/resolved", {
              interactionId,
              resolution: pick(2) ? { outcome: "approve" } : { answer: "a" },
            });
          } else if (shape.lateAnswers) openCard = { id: interactionId, turnId };
          break;
        }
        case 3: {
          const jobId = `job-${t}-${s}`;
          add("job/started", { jobId, label: `job ${s}`, turnId });
          if (pick(10) < shape.jobsOutliveTurns) running.push(jobId);
          else add("job/ended", { jobId, state: "completed" });
          break;
        }
        case 4:
          if (running.length > 0)
            add("job/ended", { jobId: running.splice(pick(running.length), 1)[0], state: "failed" });
          break;
        case 5:
          add("user/message", {
            messageId: `msg-${t}-${s}`,
            source: "user",
            text: `more ${s}`,
            attachments: [],
            interjection: true,
            meta: {},
          });
          break;
        case 6:
          add("future/thing", { note: s });
          break;
        case 7:
          add("assistant/delta", { turnId, text: "" });
          break;
        case 8:
          add("session/renamed", { title: `inside ${t}.${s}` });
          break;
        default:
          add("assistant/delta", { turnId, text: `answer ${t}.${s} ` });
      }
    }
    if (t === shape.turns) break;
    if (shape.overlapping && pick(2) === 0) {
      lateTurn = turnId;
      continue;
    }
    const state = (["completed", "completed", "failed", "cancelled", "interrupted"] as const)[pick(5)]!;
    add("turn/end", { turnId, state, ...(state === "failed" ? { error: "boom" } : {}) });
    if (openCard?.turnId === turnId && pick(2)) openCard = undefined;
  }
  return log;
}

const SEED: TranscriptSeed = {
  title: "from header",
  model: "header-model",
  origin: null,
  createdAt: 5,
  forkOf: null,
};

/** What the window shows, by its documented rule: folded from its first turn's start (or the log's), in one pass. */
function foldAtOnce(events: SessionEvent[], base: number): TranscriptState {
  const start = { ...emptyTranscript(), ...(base > 0 ? SEED : undefined) };
  const turn = events.findIndex((e) => e.type === "turn/start");
  return applyEvents(start, base === 0 || turn < 0 ? events : events.slice(turn));
}

/** `actual` equals `expected`; a fast check first, since a read back compares thousands of transcripts. */
function same(actual: TranscriptState, expected: TranscriptState): void {
  if (!isDeepStrictEqual(actual, expected)) expect(actual).toStrictEqual(expected);
}

/**
 * Opens `log` at seq `from`, then puts pages of `pageSize` in front down to the log's start while
 * the rest of the log arrives live in batches, checking the window's transcript after each step
 * against the one the console showed before the fold was kept: a fold of the whole window after a
 * page, and the events folded onto what was shown after a live batch.
 */
function readBack(
  log: SessionEvent[],
  from: number,
  liveFrom: number,
  pageSize: number,
  order: number,
): number {
  const pick = random(order);
  const window = LogWindow.restore(log.slice(from, liveFrom), SEED);
  let shown = window.fold();
  same(shown, foldAtOnce(window.events, window.base));
  let live = liveFrom;
  let steps = 0;
  while (window.base > 0 || live < log.length) {
    if (window.base > 0 && (live === log.length || pick(3) > 0)) {
      const page = log.slice(Math.max(0, window.base - pageSize), window.base);
      expect(window.prepend(page)).toBe(true);
      shown = window.fold();
      same(shown, foldAtOnce(window.events, window.base));
    } else {
      const batch = log.slice(live, live + 1 + pick(4));
      live += batch.length;
      window.append(batch);
      const expected = applyEvents(shown, batch);
      shown = window.transcript ?? expected;
      same(shown, expected);
    }
    steps += 1;
  }
  expect(window.events).toEqual(log);
  same(shown, applyEvents(emptyTranscript(), log));
  return steps;
}

const SHAPES: LogShape[] = [
  { turns: 16, jobsOutliveTurns: 0, overlapping: false, lateAnswers: false },
  { turns: 16, jobsOutliveTurns: 6, overlapping: false, lateAnswers: false },
  { turns: 16, jobsOutliveTurns: 3, overlapping: true, lateAnswers: false },
  { turns: 16, jobsOutliveTurns: 3, overlapping: true, lateAnswers: true },
];

describe("a log window read back page by page", () => {
  it("shows what one fold of the whole window shows, with pages split at every event of varied logs", () => {
    for (const [i, shape] of SHAPES.entries()) {
      for (const seed of [1, 2, 3]) {
        const log = syntheticLog(seed * 97 + i, shape);
        const last = log.length;
        for (const pageSize of [1, 2, 3, 5, 16]) {
          // each start a page boundary falls on: over the sizes, every seq is one
          for (let shift = 0; shift < Math.min(pageSize, 5); shift++) {
            const from = Math.max(1, last - 60 - shift);
            readBack(log, from, last - (seed % 2 === 0 ? 0 : 25), pageSize, seed + pageSize + shift);
          }
        }
        // opened at every seq: from inside each turn, at its start, between turns
        if (seed === 1) for (let from = 1; from < last; from++) readBack(log, from, last, 7, from);
      }
    }
  });

  it("keeps what it folded of the newer part when a page is joined in front, rather than folding it again", () => {
    const log = syntheticLog(11, SHAPES[1]!);
    const firstTurn = log.findIndex((e) => e.type === "turn/start" && e.seq > log.length - 80);
    const window = LogWindow.restore(log.slice(firstTurn), SEED);
    const before = window.fold();
    let joined = 0;
    while (window.base > 0) {
      const newest = window.fold().turns.at(-1);
      window.prepend(log.slice(Math.max(0, window.base - 10), window.base));
      // a turn of the part already held is the very object folded before
      if (window.fold().turns.at(-1) === newest) joined += 1;
      same(window.fold(), foldAtOnce(window.events, window.base));
    }
    expect(window.fold().turns.at(-1)).toBe(before.turns.at(-1));
    expect(joined).toBeGreaterThan(0);
  });
});
