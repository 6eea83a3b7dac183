import { afterEach, expect, test } from "vitest";
import { Limits } from "../../protocol/limits.js";
import { ADMIN } from "../../src/host/principal.js";
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
