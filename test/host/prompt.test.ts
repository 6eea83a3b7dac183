import { afterEach, describe, expect, test, vi } from "vitest";
import type { AgentDriver } from "../../src/agents/agent.js";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import type { ControlDelta } from "../../src/host/live/live-state.js";
import { ADMIN } from "../../src/host/principal.js";
import {
  assistantText,
  errorCode,
  type HostFixture,
  openHost,
  readLog,
  recordedFirstElsewhere,
  turnEvents,
} from "./host-fixture.js";

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

/** An agent whose turn for `waitFor` returns only once `release` is called; other turns complete at once. */
function gatedAgent(waitFor: string): { agent: AgentDriver; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const demo = new DemoAgent();
  const agent: AgentDriver = {
    name: "gated",
    defaultModel: "demo-fast",
    models: () => demo.models(),
    runTurn: async (turn) => {
      if (turn.prompt.text === waitFor) await gate;
      return { state: "completed" };
    },
  };
  return { agent, release };
}

describe("session.prompt answers and order", () => {
  test("a retry answers exactly {queued, itemId} while queued and {queued, seq, turnId} once started", async () => {
    const { agent, release } = gatedAgent("wait");
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const running = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "wait",
      clientMessageId: "r",
    });
    expect(running).toStrictEqual({ queued: false, seq: expect.any(Number), turnId: expect.any(String) });
    const params = { sessionId: S, text: "later", clientMessageId: "q" };
    const queued = await fx.host.call(ADMIN, "session.prompt", params);
    expect(queued).toStrictEqual({ queued: true, itemId: expect.any(String) });
    expect(await fx.host.call(ADMIN, "session.prompt", params)).toStrictEqual(queued);
    release();
    await vi.waitFor(async () => {
      expect((await readLog(fx.store, S)).filter((e) => e.type === "turn/end")).toHaveLength(2);
    });
    const message = (await readLog(fx.store, S)).find(
      (e) => e.type === "user/message" && e.data.text === "later",
    );
    expect(await fx.host.call(ADMIN, "session.prompt", params)).toStrictEqual({
      queued: false,
      seq: message!.seq,
      turnId: expect.any(String),
    });
  });

  test("a hidden prompt is stored without its text and flagged hidden; the agent still gets the text", async () => {
    fx = await coldSession();
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "secret",
      hidden: true,
      clientMessageId: "h",
    });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(events.find((e) => e.type === "user/message")?.data).toMatchObject({ text: "", hidden: true });
    expect(assistantText(events)).toBe("Echo: secret");
  });

  test("a prompt whose key another writer records just before its turn starts answers that record", async () => {
    fx = await coldSession();
    const other = "other-writer-turn";
    recordedFirstElsewhere(fx.store, S, "raced", other);
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "raced",
      clientMessageId: "raced",
    });
    const log = await readLog(fx.store, S);
    const message = log.find((e) => e.type === "user/message");
    expect(r).toStrictEqual({ queued: false, turnId: other, seq: message!.seq });
    expect(log.filter((e) => e.type === "user/message")).toHaveLength(1);
  });

  test("a queued prompt whose key another writer records just before it is queued answers that record", async () => {
    const { agent, release } = gatedAgent("wait");
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "wait", clientMessageId: "r" });
    const enqueue = fx.store.enqueuePrompt.bind(fx.store);
    let otherItem: string | undefined;
    vi.spyOn(fx.store, "enqueuePrompt").mockImplementation(async (input) => {
      if (otherItem === undefined) {
        otherItem = "item-of-the-other-writer";
        const won = await enqueue({ ...input, itemId: otherItem });
        expect(won.status).toBe("queued");
      }
      return enqueue(input);
    });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "raced",
      clientMessageId: "raced",
    });
    expect(r).toStrictEqual({ queued: true, itemId: otherItem });
    expect(fx.host.live.queue(S).map((i) => i.itemId)).toEqual([otherItem]);
    release();
  });

  test("a prompt arriving while an earlier one's queue write is in flight queues behind it, even once the turn ended", async () => {
    const { agent, release } = gatedAgent("first");
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const first = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "first",
      clientMessageId: "1",
    });
    // queue writes held in flight, still committed in the order they were asked for
    let open!: () => void;
    const held = new Promise<void>((resolve) => {
      open = resolve;
    });
    let previous: Promise<unknown> = held;
    const enqueue = fx.store.enqueuePrompt.bind(fx.store);
    vi.spyOn(fx.store, "enqueuePrompt").mockImplementation((input) => {
      const write = previous.then(() => enqueue(input));
      previous = write;
      return write;
    });
    const second = fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "second",
      clientMessageId: "2",
    });
    release();
    await turnEvents(fx.store, S, first.turnId!);
    await vi.waitFor(() => expect(fx.host.live.agents()).toEqual([{ sessionId: S, state: "running" }]));
    // the turn is over and the queue still empty: only the write in flight says the session is not free
    const third = fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "third",
      clientMessageId: "3",
    });
    open();
    expect(await second).toMatchObject({ queued: true });
    expect(await third).toMatchObject({ queued: true });
    await vi.waitFor(async () => {
      const log = await readLog(fx.store, S);
      expect(log.filter((e) => e.type === "turn/end")).toHaveLength(3);
    });
    const texts = (await readLog(fx.store, S)).flatMap((e) =>
      e.type === "user/message" ? [e.data.text] : [],
    );
    expect(texts).toEqual(["first", "second", "third"]);
    // nothing is in flight any more: the session is idle and the next prompt starts at once
    await vi.waitFor(() => expect(fx.host.live.agents()).toEqual([{ sessionId: S, state: "idle" }]));
    const fourth = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "fourth",
      clientMessageId: "4",
    });
    expect(fourth).toMatchObject({ queued: false, turnId: expect.any(String) });
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

  test("a session with neither agent nor queued items is agent_not_live", async () => {
    fx = await coldSession();
    expect(
      await errorCode(() =>
        fx.host.call(ADMIN, "session.updateQueue", { sessionId: S, op: { clear: true } }),
      ),
    ).toEqual({ code: "agent_not_live", data: { sessionId: S } });
  });

  test("a delete that lands between the check and the queue write refuses the change session_retired", async () => {
    fx = await coldSession();
    await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/sleep 30000",
      clientMessageId: "run",
    });
    const clearQueue = fx.store.clearQueue.bind(fx.store);
    vi.spyOn(fx.store, "clearQueue").mockImplementation(async (sessionId) => {
      expect((await fx.store.delete(sessionId)).status).toBe("deleted");
      return clearQueue(sessionId);
    });
    expect(
      await errorCode(() =>
        fx.host.call(ADMIN, "session.updateQueue", { sessionId: S, op: { clear: true } }),
      ),
    ).toEqual({ code: "session_retired", data: { sessionId: S } });
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

describe("a retry of a queued prompt after it left the queue", () => {
  test("answers its first answer and never queues it again, after a remove and after a clear", async () => {
    fx = await coldSession();
    await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/sleep 30000",
      clientMessageId: "run",
    });
    const first = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "a",
      clientMessageId: "a",
    });
    const second = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "b",
      clientMessageId: "b",
    });
    expect(first).toMatchObject({ queued: true });
    await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { remove: true, itemId: first.itemId! },
    });
    // the socket that sent "a" lost its answer and sends it again: the user's removal stands
    expect(
      await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "a", clientMessageId: "a" }),
    ).toEqual(first);
    const queued = await fx.host.call(ADMIN, "session.updateQueue", { sessionId: S, op: { clear: true } });
    expect(queued.items).toEqual([]);
    expect(
      await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "b", clientMessageId: "b" }),
    ).toEqual(second);
    expect(await fx.store.queue(S)).toEqual([]);
  });
});

describe("session.cancel", () => {
  test("answers cancelled: false for a live session with no turn, and keeps its agent", async () => {
    fx = await coldSession();
    const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "hi", clientMessageId: "m" });
    await turnEvents(fx.store, S, r.turnId!);
    await vi.waitFor(() => expect(fx.host.live.agents()).toEqual([{ sessionId: S, state: "idle" }]));
    expect(await fx.host.call(ADMIN, "session.cancel", { sessionId: S })).toEqual({ cancelled: false });
    expect(fx.host.live.agents()).toEqual([{ sessionId: S, state: "idle" }]);
  });
});
