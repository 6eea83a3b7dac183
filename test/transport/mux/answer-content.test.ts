import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../../support/host.js";
import { until } from "../../support/until.js";
import { api } from "../http/http-client.js";
import { createSession } from "./mux-fixture.js";
import { refusalHost } from "./refusal-host.js";

const RULE = "must contain a visible character, not only whitespace or invisible characters";
const BLANKS = ["", "   ", "\n\t", "\u3000", "\u200b\u2060"];

describe("an answer must fit its interaction and show something (session.respond and the HTTP answer route)", () => {
  let question: string;
  let approval: string;

  async function pendingOf(sessionId: string): Promise<string> {
    await until(
      () => shared.host.host.live.interactions().some((i) => i.sessionId === sessionId),
      10_000,
      "the interaction",
    );
    return shared.host.host.live.interactions().find((i) => i.sessionId === sessionId)!.interactionId;
  }

  const shared = refusalHost(async (_host, peer) => {
    const asking = await createSession(peer);
    await peer.call("session.prompt", {
      sessionId: asking,
      clientMessageId: "q",
      text: "/ask Which colour?",
    });
    question = await pendingOf(asking);
    const approving = await createSession(peer);
    await peer.call("session.prompt", {
      sessionId: approving,
      clientMessageId: "a",
      text: "/approve ship it",
    });
    approval = await pendingOf(approving);
  });

  /** Nothing durable changed and both interactions still wait for their answer. */
  function unchanged(): void {
    shared.expectUnchanged();
    const pending = shared.host.host.live.interactions().map((i) => i.interactionId);
    expect(pending).toContain(question);
    expect(pending).toContain(approval);
  }

  for (const answer of BLANKS) {
    it(`a question answered ${JSON.stringify(answer)} → bad_request naming /response/answer`, async () => {
      const error = await shared.peer.callError("session.respond", {
        interactionId: question,
        response: { answer },
      });
      expect(error.code).toBe("bad_request");
      expect(error.message).toBe(`params/response/answer: ${RULE}`);
      expect(error.data).toEqual({ field: "/response/answer" });
      unchanged();
    });
  }

  it("a question answered with an outcome → bad_request naming /response", async () => {
    const error = await shared.peer.callError("session.respond", {
      interactionId: question,
      response: { outcome: "approve" },
    });
    expect(error.code).toBe("bad_request");
    expect(error.message).toBe(
      `response: interaction ${question} is a question; answer it with {answer: "<text>"}`,
    );
    expect(error.data).toEqual({ field: "/response" });
    unchanged();
  });

  it("an approval answered in words → bad_request naming /response", async () => {
    const error = await shared.peer.callError("session.respond", {
      interactionId: approval,
      response: { answer: "yes" },
    });
    expect(error.code).toBe("bad_request");
    expect(error.message).toBe(
      `response: interaction ${approval} is an approval; answer it with {outcome: "approve"} or {outcome: "deny"}`,
    );
    expect(error.data).toEqual({ field: "/response" });
    unchanged();
  });

  it("over HTTP: a blank answer and an answer of the other kind are 400 bad_request with the field and rule", async () => {
    const post = (id: string, body: unknown) =>
      api(shared.host, `/v1/interactions/${id}/answer`, { method: "POST", token: ADMIN_TOKEN, body });
    const blank = await post(question, { answer: " \u200b " });
    expect(blank.status).toBe(400);
    expect(blank.json).toEqual({ error: "bad_request", field: "/answer", message: `body/answer: ${RULE}` });
    const outcome = await post(question, { outcome: "deny" });
    expect(outcome.status).toBe(400);
    expect(outcome.json).toEqual({
      error: "bad_request",
      field: "/",
      message: `response: interaction ${question} is a question; answer it with {answer: "<text>"}`,
    });
    const words = await post(approval, { answer: "ok" });
    expect(words.status).toBe(400);
    expect(words.json).toMatchObject({ error: "bad_request", field: "/" });
    unchanged();
  });

  it("answers that fit are taken", async () => {
    await shared.peer.call("session.respond", { interactionId: question, response: { answer: " blue " } });
    await shared.peer.call("session.respond", { interactionId: approval, response: { outcome: "deny" } });
    await until(() => shared.host.host.live.interactions().length === 0, 10_000, "both answered");
  });
});
