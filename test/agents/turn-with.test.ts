import { afterEach, describe, expect, test, vi } from "vitest";
import type { Resolution, SessionEvent } from "../../protocol/index.js";
import type { TurnContext } from "../../src/agents/agent.js";
import { turnWith } from "../../src/agents/turn-with.js";
import { ADMIN } from "../../src/host/principal.js";
import { demoAgentWith, type HostFixture, openHost, readLog, turnEvents } from "../host/host-fixture.js";

const S = "wrapped";
let fx: HostFixture;

afterEach(async () => {
  await fx.dispose();
});

interface Seen {
  same: Record<string, boolean>;
  model: string;
  history: string[];
  head: { types: string[]; hasMore: boolean };
  beforeStart: { seqs: number[]; hasMore: boolean };
  jobId: string;
  resolution: Resolution;
  interjections: string[];
}

describe("a turn with some members replaced", () => {
  test("the replaced ones are used; every other one reaches the host's turn", async () => {
    let seen: Seen | undefined;
    fx = await openHost({
      agent: demoAgentWith("wrapping", async (turn: TurnContext) => {
        const wrapped = turnWith(turn, { model: "replaced" });
        const history = await wrapped.history();
        const start = history.find((e) => e.type === "turn/start" && e.data.turnId === turn.turnId)!;
        const head = await wrapped.historyPage();
        const beforeStart = await wrapped.historyPage(start.seq);
        await wrapped.emit({ type: "assistant/delta", text: "through the wrapper" });
        const job = wrapped.startJob("indexing");
        job.complete();
        const resolution = await wrapped.requestInteraction({ kind: "approval", action: "go on?" });
        seen = {
          same: {
            sessionId: wrapped.sessionId === turn.sessionId,
            turnId: wrapped.turnId === turn.turnId,
            prompt: wrapped.prompt === turn.prompt,
            signal: wrapped.signal === turn.signal,
          },
          model: wrapped.model,
          history: history.map((e) => e.type),
          head: { types: head.events.map((e) => e.type), hasMore: head.hasMore },
          beforeStart: { seqs: beforeStart.events.map((e) => e.seq), hasMore: beforeStart.hasMore },
          jobId: job.jobId,
          resolution,
          interjections: await wrapped.takeInterjections(),
        };
        return { state: "completed" };
      }),
    });
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "go", clientMessageId: "p" });
    const asked = await vi.waitFor(
      async () => {
        const event = (await readLog(fx.store, S)).find((e) => e.type === "interaction/requested");
        if (event?.type !== "interaction/requested") throw new Error("not asked yet");
        return event.data;
      },
      { timeout: 10_000, interval: 10 },
    );
    expect(asked.action).toBe("go on?");
    // steered while the turn waits: the wrapper takes it as an interjection
    const queued = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "and this",
      clientMessageId: "q",
    });
    await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { steer: true, itemId: queued.itemId! },
    });
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: asked.interactionId,
      response: { outcome: "approve" },
    });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
    expect(seen).toBeDefined();
    const got = seen!;
    expect(got.same).toEqual({ sessionId: true, turnId: true, prompt: true, signal: true });
    expect(got.model).toBe("replaced");
    expect(got.history.slice(-2)).toEqual(["turn/start", "user/message"]);
    expect(got.head).toEqual({ types: got.history, hasMore: false });
    const log = await readLog(fx.store, S);
    const startSeq = log.find((e) => e.type === "turn/start")!.seq;
    const earlier = log.filter((e) => e.seq < startSeq).map((e) => e.seq);
    expect(earlier.length).toBeGreaterThan(0);
    expect(got.beforeStart).toEqual({ seqs: earlier, hasMore: false });
    expect(got.resolution).toEqual({ outcome: "approve" });
    expect(got.interjections).toEqual(["and this"]);
    const types = (e: SessionEvent) => [e.type, (e.data as { text?: string; label?: string }).text ?? ""];
    expect(events.map(types)).toContainEqual(["assistant/delta", "through the wrapper"]);
    const started = log.find((e) => e.type === "job/started");
    expect(started?.data).toMatchObject({ jobId: got.jobId, label: "indexing", turnId: r.turnId });
    expect(got.jobId).toEqual(expect.any(String));
  });
});
