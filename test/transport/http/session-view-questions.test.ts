import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Resolution } from "../../../protocol/index.js";
import type { AgentDriver, TurnContext, TurnOutcome } from "../../../src/agents/agent.js";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { ALICE, api, newSession, prompt, waitForState } from "./http-client.js";

/**
 * Pending questions in `GET /v1/sessions/{id}` as an agent may ask them: with choices and the
 * tool call they belong to (the demo agent asks neither), several at once.
 */

interface Pending {
  interaction_id: string;
  kind: string;
  requested_at_ms: number;
  question?: string;
  options?: string[];
  tool_call_id?: string;
}

/** `choose` asks one question with options; `three` asks three at once. */
const asker: AgentDriver = {
  name: "asker",
  defaultModel: "asker",
  models: () => [{ id: "asker", label: "asker" }],
  async runTurn(turn: TurnContext): Promise<TurnOutcome> {
    const ask = (question: string, extra = {}): Promise<Resolution> =>
      turn.requestInteraction({ kind: "question", question, ...extra });
    if (turn.prompt.text === "choose")
      await ask("which colour?", { options: ["red", "green"], toolCallId: "pick-1" });
    else await Promise.all([ask("one?"), ask("two?"), ask("three?")]);
    return { state: "completed" };
  },
};

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost({ agent: asker });
});
afterAll(async () => {
  await h?.dispose();
});

async function pending(sessionId: string): Promise<Pending[]> {
  const r = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
  expect(r.status).toBe(200);
  return (r.json as { pending_questions: Pending[] }).pending_questions;
}

async function answerAll(sessionId: string, questions: Pending[]): Promise<void> {
  for (const q of questions) {
    const r = await api(h, `/v1/interactions/${q.interaction_id}/answer`, {
      method: "POST",
      token: ALICE_TOKEN,
      body: { answer: "x" },
    });
    expect(r.status).toBe(200);
  }
  await waitForState(h, sessionId);
  expect(await pending(sessionId)).toEqual([]);
}

describe("GET /v1/sessions/{id} pending questions", () => {
  it("shows a question's options and the tool call it belongs to", async () => {
    const sessionId = await newSession(h, ALICE);
    await prompt(h, ALICE, sessionId, "choose");
    await waitForState(h, sessionId, "input-required");
    const questions = await pending(sessionId);
    expect(questions).toEqual([
      expect.objectContaining({
        kind: "question",
        question: "which colour?",
        options: ["red", "green"],
        tool_call_id: "pick-1",
      }),
    ]);
    await answerAll(sessionId, questions);
  });

  it("lists questions asked at once, each once, by request time then id", async () => {
    const sessionId = await newSession(h, ALICE);
    await prompt(h, ALICE, sessionId, "three");
    await waitForState(h, sessionId, "input-required");
    let questions: Pending[] = [];
    for (let read = 0; read < 200 && questions.length < 3; read++) questions = await pending(sessionId);
    expect(questions.map((q) => q.question).sort()).toEqual(["one?", "three?", "two?"]);
    const order = [...questions].sort(
      (a, b) => a.requested_at_ms - b.requested_at_ms || (a.interaction_id < b.interaction_id ? -1 : 1),
    );
    expect(questions).toEqual(order);
    await answerAll(sessionId, questions);
  });

  it("shows only the session's own questions while other sessions have theirs pending", async () => {
    const sessions = [await newSession(h, ALICE), await newSession(h, ALICE)];
    for (const sessionId of sessions) {
      await prompt(h, ALICE, sessionId, "choose");
      await waitForState(h, sessionId, "input-required");
    }
    const both = await Promise.all(sessions.map((sessionId) => pending(sessionId)));
    expect(both.map((questions) => questions.map((q) => (q as { session_id?: string }).session_id))).toEqual(
      sessions.map((sessionId) => [sessionId]),
    );
    for (const [i, sessionId] of sessions.entries()) await answerAll(sessionId, both[i]!);
  });
});
