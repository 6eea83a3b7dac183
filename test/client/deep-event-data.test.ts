import { describe, expect, expectTypeOf, it } from "vitest";
import { MAX_DATA_DEPTH } from "../../src/store/storable-data.js";
import { useTestHost } from "../support/use-test-host.js";

const testHost = useTestHost();

/** A tool call whose arguments are `levels` maps deep (the data map is level 0), `inner` at the bottom. */
function toolCall(levels: number, inner: unknown) {
  let args = inner;
  for (let i = 0; i < levels; i++) args = { n: args };
  return { type: "tool/call" as const, data: { turnId: "t", toolCallId: "c", name: "x", args } };
}

describe("deeply nested event data", () => {
  it("a client reads a page holding the deepest data a store takes", async () => {
    const { host, client } = testHost;
    await client.create({ sessionId: "deepest" });
    const deepest = toolCall(MAX_DATA_DEPTH, "bottom");
    expect(await host.store.append("deepest", [deepest])).toMatchObject({ status: "appended" });
    const page = await client.page({ sessionId: "deepest" });
    expect(page.events.map((e) => e.type)).toEqual(["session/created", "tool/call"]);
    expect(page.events[1]!.data).toEqual(deepest.data);
    // a page's events are typed by their `type`, as follow's are: this reads `data` without a cast
    const call = page.events[1]!;
    if (call.type !== "tool/call") throw new Error(`expected tool/call, got ${call.type}`);
    expectTypeOf(call.data.toolCallId).toEqualTypeOf<string>();
    expect([call.data.name, call.data.toolCallId]).toEqual(["x", "c"]);
  });

  it("is refused where it would leave a session no client can read, and the session reads on", async () => {
    const { host, client } = testHost;
    await client.create({ sessionId: "too-deep" });
    // a key no decoder takes, 70 levels down; and data 97 levels deep, which no page frame can carry
    const hidden = toolCall(70, JSON.parse('{"__proto__":1}'));
    await expect(host.store.append("too-deep", [hidden])).rejects.toMatchObject({ code: "bad_request" });
    await expect(host.store.append("too-deep", [toolCall(97, 1)])).rejects.toMatchObject({
      code: "bad_request",
    });
    const page = await client.page({ sessionId: "too-deep" });
    expect(page.events.map((e) => e.type)).toEqual(["session/created"]);
  });
});
