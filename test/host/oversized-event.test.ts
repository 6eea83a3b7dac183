import { afterEach, expect, test } from "vitest";
import { Limits } from "../../protocol/limits.js";
import { ADMIN } from "../../src/host/principal.js";
import { demoAgentWith, type HostFixture, openHost, readLog, turnEvents } from "./host-fixture.js";

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "oversized";

test("an agent's event over the size limit fails its turn, writes nothing of it, and the session goes on", async () => {
  // a tool whose result is 2 MiB of text: more than any reader may take in one message
  const agent = demoAgentWith("dumper", async (turn, demo) => {
    if (!turn.prompt.text.startsWith("dump")) return demo.runTurn(turn);
    await turn.emit({ type: "tool/call", toolCallId: "c1", name: "cat", args: { path: "big.log" } });
    await turn.emit({
      type: "tool/result",
      toolCallId: "c1",
      ok: true,
      result: "l".repeat(2 * Limits.maxEventBytes),
      durationMs: 1,
    });
    return { state: "completed" };
  });
  fx = await openHost({ agent });
  await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
  const dump = await fx.host.call(ADMIN, "session.prompt", {
    sessionId: S,
    text: "dump",
    clientMessageId: "a",
  });
  const events = await turnEvents(fx.store, S, dump.turnId!);
  expect(events.map((e) => e.type)).toEqual(["turn/start", "user/message", "tool/call", "turn/end"]);
  expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "failed" } });
  expect(String((events.at(-1)!.data as { error?: string }).error)).toContain("limit");
  // the next prompt runs as usual
  const next = await fx.host.call(ADMIN, "session.prompt", {
    sessionId: S,
    text: "hello",
    clientMessageId: "b",
  });
  const after = await turnEvents(fx.store, S, next.turnId!);
  expect(after.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
  expect((await readLog(fx.store, S)).some((e) => e.type === "tool/result")).toBe(false);
});
