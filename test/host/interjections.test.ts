import { afterEach, describe, expect, test } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import { gate } from "../support/gate.js";
import {
  assistantText,
  beforeAppend,
  demoAgentWith,
  type HostFixture,
  openHost,
  readLog,
  storedAttachments,
  turnEvents,
} from "./host-fixture.js";

/** Prompts steered into a running turn, and what the agent takes when the queue changed under it. */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "steered";

/** An agent whose "run" turn waits for `release`, then takes its interjections and says which. */
function takingAgent() {
  const held = gate();
  const agent = demoAgentWith("taking", async (turn) => {
    if (turn.prompt.text === "run") {
      await held.promise;
      const taken = await turn.takeInterjections();
      await turn.emit({ type: "assistant/delta", text: `taken: ${taken.join(",")}` });
    }
    return { state: "completed" };
  });
  return { agent, release: held.open };
}

const prompt = (text: string) =>
  fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: text });

const interjected = (events: SessionEvent[]) =>
  events.filter((e) => e.type === "user/message" && e.data.interjection === true);

async function steeredWhileHeld(
  attachments?: { name: string; type: string; bytes: Uint8Array }[],
): Promise<{ turnId: string; itemId: string; release: () => void }> {
  const { agent, release } = takingAgent();
  fx = await openHost({ agent });
  await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
  const running = await prompt("run");
  const queued = await fx.host.call(ADMIN, "session.prompt", {
    sessionId: S,
    text: "steer-me",
    clientMessageId: "steer-me",
    ...(attachments ? { attachments } : {}),
  });
  await fx.host.call(ADMIN, "session.updateQueue", {
    sessionId: S,
    op: { steer: true, itemId: queued.itemId! },
  });
  return { turnId: running.turnId!, itemId: queued.itemId!, release };
}

describe("interjections the agent takes", () => {
  test("a steered item is taken once: recorded in the turn and off the queue", async () => {
    const { turnId, release } = await steeredWhileHeld();
    release();
    const events = await turnEvents(fx.store, S, turnId);
    expect(assistantText(events)).toBe("taken: steer-me");
    expect(interjected(events)).toHaveLength(1);
    expect(fx.host.live.queue(S)).toEqual([]);
  });

  test("a steered item removed before the agent takes it is not taken, and the turn goes on", async () => {
    const { turnId, itemId, release } = await steeredWhileHeld();
    await fx.host.call(ADMIN, "session.updateQueue", { sessionId: S, op: { remove: true, itemId } });
    release();
    const events = await turnEvents(fx.store, S, turnId);
    expect(assistantText(events)).toBe("taken: ");
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
    expect(interjected(await readLog(fx.store, S))).toEqual([]);
  });

  test("a steered item removed between the agent's look and its append is not reported taken, and keeps no inline bytes", async () => {
    const file = { name: "a.bin", type: "application/octet-stream", bytes: new Uint8Array([1, 2, 3]) };
    const { turnId, itemId, release } = await steeredWhileHeld([file]);
    const raced = beforeAppend(
      fx.store,
      (_events, options) => options?.dequeue?.itemId === itemId,
      async () => {
        expect((await fx.store.removeQueueItem(S, itemId)).status).toBe("ok");
      },
    );
    release();
    const events = await turnEvents(fx.store, S, turnId);
    expect(raced.ran).toBe(true);
    expect(assistantText(events)).toBe("taken: ");
    expect(interjected(await readLog(fx.store, S))).toEqual([]);
    expect(fx.host.live.queue(S)).toEqual([]);
    expect(storedAttachments(fx.dbPath)).toEqual({ rows: 0, chunks: 0 });
  });
});
