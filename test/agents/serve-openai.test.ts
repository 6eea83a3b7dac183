import { existsSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { runCli, startServe } from "../cli/run-cli.js";
import { tempDir } from "../support/temp-dir.js";
import { readLog } from "../web/host-log.js";
import { FakeChatCompletions, textReply } from "./fake-chat-completions.js";

const dir = tempDir("sessionmux-serve-openai-");
let fake: FakeChatCompletions | undefined;
let client: SessionmuxClient | undefined;
let stop: (() => Promise<string>) | undefined;

afterAll(async () => {
  await client?.close();
  await stop?.();
  await fake?.close();
  dir.remove();
});

async function finishedTurn(sessionId: string, turns: number): Promise<SessionEvent[]> {
  let log: SessionEvent[] = [];
  await expect
    .poll(
      async () => {
        log = await readLog(client!, sessionId);
        return log.filter((e) => e.type === "turn/end").length;
      },
      { timeout: 30_000 },
    )
    .toBe(turns);
  return log;
}

describe("sessionmux serve --agent openai", () => {
  it("answers from the endpoint named by the environment, and logs a failed turn with its cause", async () => {
    fake = await FakeChatCompletions.start();
    const served = await startServe(["--agent", "openai", "--port", "0", "--db", dir.file("s.db")], {
      SESSIONMUX_TOKEN: "serve-openai",
      SESSIONMUX_OPENAI_BASE_URL: fake.baseURL,
      SESSIONMUX_OPENAI_MODEL: "env-model",
      SESSIONMUX_OPENAI_API_KEY: "sk-env",
    });
    stop = served.stop;
    const url = /listening on (\S+)/.exec(served.stdout)?.[1];
    expect(url, served.stdout + served.stderr).toBeDefined();
    client = createNodeClient({
      url: `${url!.replace("http:", "ws:")}/api/remote.mux`,
      token: "serve-openai",
    });
    const { header } = await client.call("session.create", {});
    fake.script(textReply("From ", "the endpoint."));
    await client.call("session.prompt", { sessionId: header.sessionId, text: "hi", clientMessageId: "1" });
    const first = await finishedTurn(header.sessionId, 1);
    expect(first.filter((e) => e.type === "assistant/delta").map((e) => e.data.text)).toEqual([
      "From ",
      "the endpoint.",
    ]);
    expect(fake.requests[0]).toMatchObject({
      headers: { authorization: "Bearer sk-env" },
      body: { model: "env-model", messages: [{ role: "user", content: "hi" }] },
    });

    // no reply scripted: the endpoint answers 500 (three times: the SDK retries twice)
    await client.call("session.prompt", { sessionId: header.sessionId, text: "again", clientMessageId: "2" });
    const second = await finishedTurn(header.sessionId, 2);
    const error = `model call failed: HTTP 500 from ${fake.baseURL}/chat/completions: {"error":"no scripted reply left"} (after 3 attempts)`;
    expect(second.at(-1)?.data).toMatchObject({ state: "failed", error });
    const output = await served.stop();
    stop = undefined;
    const logged = `${served.stdout}${output}`;
    expect(logged).toContain('"msg":"agent turn failed"');
    expect(logged).toContain(JSON.stringify(error).slice(1, -1));
  });

  it("refuses to start on OpenAI's own endpoint without a key, saying what to set, and creates nothing", async () => {
    const folder = dir.file("unkeyed");
    const noKey = {
      OPENAI_API_KEY: "",
      SESSIONMUX_OPENAI_API_KEY: "",
      OPENAI_BASE_URL: "",
      SESSIONMUX_OPENAI_BASE_URL: "",
    };
    const refused = await runCli(
      ["serve", "--agent", "openai", "--port", "0", "--db", `${folder}/s.db`, "--create-db-folder"],
      { ...noKey, SESSIONMUX_TOKEN: "t" },
    );
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      "error: agent_unconfigured: --agent openai talks to https://api.openai.com/v1, which needs a key: set SESSIONMUX_OPENAI_API_KEY (or OPENAI_API_KEY), or SESSIONMUX_OPENAI_BASE_URL for an endpoint that takes none\n",
    );
    expect(existsSync(folder)).toBe(false);
  });
});
