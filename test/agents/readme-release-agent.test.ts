import { readFileSync } from "node:fs";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { AgentDriver } from "../../src/agents/agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost, readLog, turnEvents } from "../host/host-fixture.js";
import { FakeChatCompletions, textReply, toolCallReply } from "./fake-chat-completions.js";

let fake: FakeChatCompletions | undefined;
let fx: HostFixture | undefined;
afterAll(async () => {
  await fx?.dispose();
  await fake?.close();
});

describe("the README's AI SDK agent", () => {
  it("is this file, as a user imports it", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const tested = readFileSync(new URL("./release-agent.ts", import.meta.url), "utf8").replace(
      'from "../../src/ai-sdk.js";',
      'from "sessionmux/ai-sdk";',
    );
    expect(readme).toContain(`\`\`\`ts\n${tested}\`\`\``);
  });

  it("declares its tools and parks a prod deploy on an approval", async () => {
    fake = await FakeChatCompletions.start();
    vi.stubEnv("SESSIONMUX_OPENAI_BASE_URL", fake.baseURL);
    vi.stubEnv("SESSIONMUX_OPENAI_MODEL", "release-model");
    const { releaseAgent } = (await import("./release-agent.js")) as { releaseAgent: AgentDriver };
    vi.unstubAllEnvs();
    fx = await openHost({ agent: releaseAgent });
    await fx.host.call(ADMIN, "session.create", { sessionId: "r" });
    fake.script(
      toolCallReply("", [{ id: "call_1", name: "deploy", args: { target: "prod" } }]),
      textReply("Not deployed."),
    );
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "r",
      text: "ship",
      clientMessageId: "1",
    });
    const interactionId = await vi.waitFor(
      async () => {
        const asked = (await readLog(fx!.store, "r")).find((e) => e.type === "interaction/requested");
        if (asked?.type !== "interaction/requested") throw new Error("not asked yet");
        return asked.data.interactionId;
      },
      { timeout: 15_000 },
    );
    await fx.host.call(ADMIN, "session.respond", { interactionId, response: { outcome: "deny" } });
    const events = await turnEvents(fx.store, "r", r.turnId!);
    expect(events.find((e) => e.type === "tool/result")?.data).toMatchObject({
      toolCallId: "call_1",
      ok: false,
    });
    expect(fake.requests[0]!.body.model).toBe("release-model");
    expect(fake.requests[0]!.body.messages[0]).toEqual({
      role: "system",
      content: "You are the release assistant of a small team.",
    });
    expect(fake.requests[0]!.body.tools?.map((t) => t.function.name)).toEqual(["weather", "deploy"]);
    expect(fake.requests[0]!.body.tools?.[1]?.function.parameters).toMatchObject({
      properties: { target: { enum: ["staging", "prod"] } },
    });
  });
});
