import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { ALICE, api, newSession, prompt, waitForState } from "./http-client.js";

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost();
});
afterAll(async () => {
  await h?.dispose();
});

const completed = (sessionId: string, state = "completed") => waitForState(h, sessionId, state);

describe("GET /healthz", () => {
  it("answers without a token", async () => {
    const r = await api(h, "/healthz");
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ ok: true });
  });
});

describe("GET /v1/sessions/{id}", () => {
  it("returns metadata, messages in order with segments and tool calls, and pending questions", async () => {
    const sessionId = await newSession(h, ALICE, "hello");
    await completed(sessionId);
    await prompt(h, ALICE, sessionId, "/approve deploy");
    await completed(sessionId, "input-required");
    const r = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
    expect(r.status).toBe(200);
    const v = r.json as Record<string, unknown> & { messages: Record<string, unknown>[] };
    // Example: {"id":"s1","title":"","origin":null,"kind":"chat","created_at_ms":1,"updated_at_ms":2,"message_count":4,
    //           "has_unseen_completion":true,"completion_settled_at_ms":3,"messages":[…],"is_streaming":true,
    //           "pending_questions":[{"interaction_id":"i1","session_id":"s1","turn_id":"t2","kind":"approval",
    //           "requested_at_ms":4,"action":"deploy"}],"seq":9,"epoch":"…"}
    expect(v).toMatchObject({
      id: sessionId,
      title: expect.any(String),
      kind: "chat",
      created_at_ms: expect.any(Number),
      updated_at_ms: expect.any(Number),
      has_unseen_completion: expect.any(Boolean),
      is_streaming: true,
    });
    expect(v).toHaveProperty("origin");
    expect(v).toHaveProperty("completion_settled_at_ms");
    expect(v.message_count).toBe(v.messages.length);
    expect(v.messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(v.messages[0]).toMatchObject({
      role: "user",
      content: "hello",
      ts_ms: expect.any(Number),
      attachments: [],
    });
    expect(v.messages[0]!.metadata).toMatchObject({ interjection: false, attachments: [] });
    expect(v.messages[1]!.metadata).toMatchObject({ segments: [{ kind: "text" }], toolCalls: [] });
    const approval = v.messages[3]!.metadata as {
      segments: { kind: string }[];
      toolCalls: { name: string }[];
    };
    expect(approval.segments.map((s) => s.kind)).toEqual(expect.arrayContaining(["tool", "block"]));
    expect(approval.toolCalls).toHaveLength(1);
    const pending = v.pending_questions as { interaction_id: string; kind: string; action?: string }[];
    expect(pending).toEqual([
      expect.objectContaining({
        interaction_id: expect.any(String),
        session_id: sessionId,
        kind: "approval",
        turn_id: expect.any(String),
        action: "deploy",
      }),
    ]);
    const ts = v.messages.map((m) => m.ts_ms as number);
    expect([...ts].sort((a, b) => a - b)).toEqual(ts);
  });

  it("keeps a job where it started, running and then with its outcome, after its turn ended", async () => {
    const sessionId = await newSession(h, ALICE, "hello");
    await completed(sessionId);
    await prompt(h, ALICE, sessionId, "/job 2");
    await completed(sessionId);
    const jobsOf = async () => {
      const r = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
      const messages = (r.json as { messages: { metadata: Record<string, unknown> }[] }).messages;
      return messages[3]!.metadata as { segments: { kind: string; jobId?: string }[]; jobs: unknown[] };
    };
    const running = await jobsOf();
    expect(running.jobs).toEqual([
      {
        jobId: expect.any(String),
        label: "demo job (2s)",
        startedAt: expect.any(Number),
        state: "running",
        endedAt: null,
      },
    ]);
    const jobId = (running.jobs[0] as { jobId: string }).jobId;
    expect(running.segments).toContainEqual({ kind: "job", jobId });
    await vi.waitFor(
      async () => expect((await jobsOf()).jobs).toMatchObject([{ jobId, state: "completed" }]),
      {
        timeout: 10_000,
      },
    );
    const ended = (await jobsOf()).jobs[0] as { startedAt: number; endedAt: number };
    expect(ended.endedAt).toBeGreaterThanOrEqual(ended.startedAt);
  });

  it("follows new turns and clears between reads of the same session", async () => {
    const sessionId = await newSession(h, ALICE, "one");
    await completed(sessionId);
    const contents = async () =>
      (
        (await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN })).json as {
          messages: { role: string; content: string }[];
        }
      ).messages
        .filter((m) => m.role === "user")
        .map((m) => m.content);
    expect(await contents()).toEqual(["one"]);
    await prompt(h, ALICE, sessionId, "two");
    await vi.waitFor(async () => expect((await h.store.projection(sessionId))?.turnCount).toBe(2), {
      interval: 20,
    });
    await completed(sessionId);
    expect(await contents()).toEqual(["one", "two"]);
    await api(h, `/api/chat/sessions/${sessionId}?retire=false`, { method: "DELETE", token: ALICE_TOKEN });
    expect(await contents()).toEqual([]);
    await prompt(h, ALICE, sessionId, "three");
    await vi.waitFor(async () => expect(await contents()).toEqual(["three"]), { interval: 20 });
  });

  it("unknown id answers 404 session_not_found", async () => {
    const r = await api(h, "/v1/sessions/does-not-exist", { token: ALICE_TOKEN });
    expect(r.status).toBe(404);
    expect(r.json).toEqual({ error: "session_not_found" });
  });
});

describe("POST /v1/interactions/{id}/answer", () => {
  it("answers an approval once; a different second answer is 409 with the winner; unknown is 404", async () => {
    const sessionId = await newSession(h, ALICE, "/approve ship it");
    await completed(sessionId, "input-required");
    const view = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
    const id = (view.json as { pending_questions: { interaction_id: string }[] }).pending_questions[0]!
      .interaction_id;
    const first = await api(h, `/v1/interactions/${id}/answer`, {
      method: "POST",
      token: ALICE_TOKEN,
      body: { outcome: "approve" },
    });
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ resolved: true });
    const again = await api(h, `/v1/interactions/${id}/answer`, {
      method: "POST",
      token: ALICE_TOKEN,
      body: { outcome: "approve" },
    });
    expect(again.status).toBe(200);
    const other = await api(h, `/v1/interactions/${id}/answer`, {
      method: "POST",
      token: ALICE_TOKEN,
      body: { outcome: "deny" },
    });
    expect(other.status).toBe(409);
    expect(other.json).toMatchObject({
      error: "interaction_already_resolved",
      winner: { outcome: "approve" },
    });
    await completed(sessionId);
    const missing = await api(h, "/v1/interactions/nope/answer", {
      method: "POST",
      token: ALICE_TOKEN,
      body: { answer: "x" },
    });
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual({ error: "interaction_not_found" });
  });

  it("answers a question with {answer}", async () => {
    const sessionId = await newSession(h, ALICE, "/ask favourite number?");
    await completed(sessionId, "input-required");
    const view = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
    const q = (view.json as { pending_questions: { interaction_id: string; kind: string }[] })
      .pending_questions[0]!;
    expect(q.kind).toBe("question");
    const r = await api(h, `/v1/interactions/${q.interaction_id}/answer`, {
      method: "POST",
      token: ALICE_TOKEN,
      body: { answer: "42" },
    });
    expect(r.status).toBe(200);
    await completed(sessionId);
    const after = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
    expect((after.json as { pending_questions: unknown[] }).pending_questions).toEqual([]);
    expect(after.text).toContain("42");
  });
});

describe("GET /metrics", () => {
  it("serves Prometheus text with the HTTP request counter by route and status", async () => {
    await api(h, "/healthz");
    const r = await api(h, "/metrics", { token: ADMIN_TOKEN });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^text\/plain/);
    expect(r.text).toMatch(/sessionmux_http_requests_total\{route="GET \/healthz",status="200"\} \d+/);
    expect(r.text).toContain("sessionmux_appends_total");
  });

  it("labels the session routes by their pattern", async () => {
    const sessionId = await newSession(h, ALICE);
    await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
    const post = { method: "POST", token: ALICE_TOKEN };
    await api(h, `/v1/sessions/${sessionId}/seen`, { ...post, body: { completion_settled_at_ms: 0 } });
    await api(h, "/v1/interactions/unknown/answer", { ...post, body: { answer: "x" } });
    const r = await api(h, "/metrics", { token: ADMIN_TOKEN });
    for (const label of [
      'route="GET /v1/sessions/:id",status="200"',
      'route="POST /v1/sessions/:id/seen",status="200"',
      'route="POST /v1/interactions/:id/answer",status="404"',
    ])
      expect(r.text).toContain(label);
  });
});
