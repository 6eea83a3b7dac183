import { afterEach, describe, expect, test, vi } from "vitest";
import type { AgentDriver } from "../../src/agents/agent.js";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import type { ControlDelta } from "../../src/host/live/live-state.js";
import { ADMIN } from "../../src/host/principal.js";
import { assistantText, type HostFixture, openHost, readLog, turnEvents } from "./host-fixture.js";

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "prompted";

async function coldSession(): Promise<HostFixture> {
  const fixture = await openHost();
  await fixture.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
  return fixture;
}

describe("session.prompt", () => {
  test("two concurrent prompts to a cold session start exactly one agent; the second is queued", async () => {
    fx = await coldSession();
    const attached: string[] = [];
    fx.host.live.subscribe((d: ControlDelta) => {
      if (d.kind === "agent" && d.state === "attached") attached.push(d.sessionId);
    });
    const [a, b] = await Promise.all([
      fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "/sleep 50", clientMessageId: "a" }),
      fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "second", clientMessageId: "b" }),
    ]);
    expect(attached).toEqual([S]);
    expect((await fx.metrics.agentsLiveGauge.get()).values[0]?.value).toBe(1);
    expect(a.queued).toBe(false);
    expect(b.queued).toBe(true);
    expect(b.itemId).toEqual(expect.any(String));
    await turnEvents(fx.store, S, a.turnId!);
    // the queued prompt runs next, as its own turn triggered by the queue
    await vi.waitFor(async () => {
      const starts = (await readLog(fx.store, S)).filter((e) => e.type === "turn/start");
      expect(starts.map((e) => e.type === "turn/start" && e.data.trigger)).toEqual(["prompt", "queue"]);
    });
  });

  test("the result's seq is the stored user/message, committed right after its turn/start", async () => {
    fx = await coldSession();
    const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "hi", clientMessageId: "m" });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(events[0]).toMatchObject({ type: "turn/start", data: { turnId: r.turnId, trigger: "prompt" } });
    expect(events[1]).toMatchObject({
      seq: r.seq,
      type: "user/message",
      data: { text: "hi", source: "user" },
    });
    expect(events[0]!.seq + 1).toBe(r.seq);
  });

  test("display is stored, text goes to the agent, inline bytes are kept aside as an attachment", async () => {
    fx = await coldSession();
    const bytes = new Uint8Array([1, 2, 3, 4]);
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "model text",
      display: "shown text",
      clientMessageId: "att",
      attachments: [{ name: "a.bin", type: "application/octet-stream", bytes }],
    });
    const events = await turnEvents(fx.store, S, r.turnId!);
    const message = events.find((e) => e.type === "user/message");
    expect(message?.data).toMatchObject({
      text: "shown text",
      attachments: [{ name: "a.bin", type: "application/octet-stream", size: 4, omittedBytes: 4 }],
    });
    expect(assistantText(events)).toBe("Echo: model text");
    const attachmentId =
      message?.type === "user/message" ? message.data.attachments[0]?.attachmentId : undefined;
    expect(attachmentId).toEqual(expect.any(String));
    const stored = await fx.host.call(ADMIN, "session.attachment", {
      sessionId: S,
      attachmentId: attachmentId!,
    });
    expect(stored).toMatchObject({ name: "a.bin", size: 4 });
    expect([...stored.bytes]).toEqual([1, 2, 3, 4]);
  });

  test("the same clientMessageId twice, sequentially and concurrently, stores one user/message", async () => {
    fx = await coldSession();
    const params = { sessionId: S, text: "once", clientMessageId: "dup" };
    const concurrent = await Promise.all(
      Array.from({ length: 8 }, () => fx.host.call(ADMIN, "session.prompt", params)),
    );
    const again = await fx.host.call(ADMIN, "session.prompt", params);
    for (const r of [...concurrent, again]) expect(r).toEqual(concurrent[0]);
    await turnEvents(fx.store, S, concurrent[0]!.turnId!);
    const messages = (await readLog(fx.store, S)).filter((e) => e.type === "user/message");
    expect(messages).toHaveLength(1);
  });

  test("a retry after a host restart returns the first answer and appends nothing", async () => {
    fx = await coldSession();
    const params = { sessionId: S, text: "durable", clientMessageId: "kept" };
    const first = await fx.host.call(ADMIN, "session.prompt", params);
    await turnEvents(fx.store, S, first.turnId!);
    const head = (await readLog(fx.store, S)).length;
    await fx.restart();
    expect(await fx.host.call(ADMIN, "session.prompt", params)).toEqual(first);
    expect(await readLog(fx.store, S)).toHaveLength(head);
    expect(fx.host.live.agents()).toEqual([]);
  });

  test("queued prompts run in order after the current turn", async () => {
    fx = await coldSession();
    // the first turn waits for an answer, so the queue fills deterministically while it runs
    const first = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/ask go?",
      clientMessageId: "0",
    });
    for (let i = 1; i <= 3; i++) {
      const r = await fx.host.call(ADMIN, "session.prompt", {
        sessionId: S,
        text: `q${i}`,
        clientMessageId: `${i}`,
      });
      expect(r.queued).toBe(true);
    }
    expect(fx.host.live.queue(S).map((i) => i.text)).toEqual(["q1", "q2", "q3"]);
    await vi.waitFor(() => expect(fx.host.live.interactions()).toHaveLength(1));
    const [question] = fx.host.live.interactions();
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: question!.interactionId,
      response: { answer: "yes" },
    });
    await turnEvents(fx.store, S, first.turnId!);
    await vi.waitFor(async () => {
      const log = await readLog(fx.store, S);
      expect(log.filter((e) => e.type === "turn/end")).toHaveLength(4);
      const texts = log.flatMap((e) => (e.type === "user/message" ? [e.data.text] : []));
      expect(texts).toEqual(["/ask go?", "q1", "q2", "q3"]);
    });
    expect(fx.host.live.queue(S)).toEqual([]);
  });
});

describe("session.updateQueue", () => {
  test("steer records an interjection inside the running turn, and the turn acknowledges it", async () => {
    fx = await coldSession();
    const running = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/stream 30 20",
      clientMessageId: "run",
    });
    const queued = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "turn left",
      clientMessageId: "q",
    });
    // wait until the turn has streamed a little, so the interjection lands mid-turn
    await vi.waitFor(async () => {
      const log = await readLog(fx.store, S);
      expect(log.filter((e) => e.type === "assistant/delta").length).toBeGreaterThanOrEqual(2);
    });
    const { items } = await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { steer: true, itemId: queued.itemId! },
    });
    // recorded where the agent takes it: until then it stays queued, first
    expect(items.map((i) => i.itemId)).toEqual([queued.itemId]);
    const events = await turnEvents(fx.store, S, running.turnId!);
    const at = events.findIndex((e) => e.type === "user/message" && e.data.interjection === true);
    expect(at).toBeGreaterThan(2);
    expect(events[at]).toMatchObject({ data: { text: "turn left", source: "user", interjection: true } });
    const later = events.slice(at + 1).filter((e) => e.type === "assistant/delta");
    expect(later.length).toBeGreaterThan(0);
    expect(assistantText(later)).toContain("[noted: turn left]");
    expect(assistantText(events.slice(0, at))).not.toContain("[noted");
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
    // steered, not queued: no second turn, and the retry of the steered prompt answers its turn
    expect((await readLog(fx.store, S)).filter((e) => e.type === "turn/start")).toHaveLength(1);
    expect(fx.host.live.queue(S)).toEqual([]);
    expect(
      await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "turn left", clientMessageId: "q" }),
    ).toEqual({ queued: false, turnId: running.turnId, seq: events[at]!.seq });
  });

  test("a steer the agent never takes before its turn ends becomes the next prompt, run once", async () => {
    // an agent that never reads interjections: its first turn waits until the test lets it end
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const agent = new DemoAgent();
    const silent: AgentDriver = {
      name: "silent",
      defaultModel: "demo-fast",
      models: () => agent.models(),
      runTurn: async (turn) => {
        if (turn.prompt.text === "wait") await gate;
        return { state: "completed" };
      },
    };
    fx = await openHost({ agent: silent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const running = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "wait",
      clientMessageId: "run",
    });
    const other = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "queued first",
      clientMessageId: "o",
    });
    const steered = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "steered",
      clientMessageId: "s",
    });
    const { items } = await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { steer: true, itemId: steered.itemId! },
    });
    expect(items.map((i) => i.itemId)).toEqual([steered.itemId, other.itemId]);
    release();
    await turnEvents(fx.store, S, running.turnId!);
    await vi.waitFor(async () => {
      const log = await readLog(fx.store, S);
      expect(log.filter((e) => e.type === "turn/end")).toHaveLength(3);
    });
    const log = await readLog(fx.store, S);
    const messages = log.flatMap((e) =>
      e.type === "user/message" ? [[e.data.text, e.data.interjection ?? false]] : [],
    );
    expect(messages).toEqual([
      ["wait", false],
      ["steered", false],
      ["queued first", false],
    ]);
  });

  test("remove, edit and clear change the queue and answer its new snapshot", async () => {
    fx = await coldSession();
    await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/sleep 30000",
      clientMessageId: "run",
    });
    const ids: string[] = [];
    for (const t of ["a", "b", "c"]) {
      ids.push(
        (await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: t, clientMessageId: t })).itemId!,
      );
    }
    const removed = await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { remove: true, itemId: ids[1]! },
    });
    expect(removed.items.map((i) => i.text)).toEqual(["a", "c"]);
    const edited = await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { edit: true, itemId: ids[2]!, text: "c2" },
    });
    expect(edited.items.map((i) => i.text)).toEqual(["a", "c2"]);
    const missing = await fx.host
      .call(ADMIN, "session.updateQueue", { sessionId: S, op: { remove: true, itemId: ids[1]! } })
      .catch((e: { code: string }) => e.code);
    expect(missing).toBe("queue_item_not_found");
    const cleared = await fx.host.call(ADMIN, "session.updateQueue", { sessionId: S, op: { clear: true } });
    expect(cleared.items).toEqual([]);
  });
});
