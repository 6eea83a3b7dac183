import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { ALICE, api, newSession, prompt, settledState } from "./http-client.js";

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost();
});
afterAll(async () => {
  await h?.dispose();
});

async function completed(sessionId: string, state = "completed") {
  await vi.waitFor(async () => expect(await settledState(h, sessionId)).toBe(state), {
    timeout: 10_000,
    interval: 20,
  });
}

describe("GET /healthz", () => {
  it("answers without a token", async () => {
    const r = await api(h, "/healthz");
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ ok: true });
  });
});

describe("GET /api/chat/sessions", () => {
  it("lists the principal's sessions newest first in the seeds' shape", async () => {
    const older = await newSession(h, ALICE, "first");
    await completed(older);
    const newer = await newSession(h, ALICE, "second");
    await completed(newer);
    const r = await api(h, "/api/chat/sessions?limit=50", { token: ALICE_TOKEN });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^application\/json/);
    // Example: {"sessions":[{"session_id":"s1","title":"","last_updated":"2026-01-01T00:00:00.000Z","turn_count":1,"last_state":"completed"}]}
    const body = r.json as { sessions: Record<string, unknown>[] };
    const ids = body.sessions.map((s) => s.session_id);
    expect(ids.indexOf(newer)).toBeLessThan(ids.indexOf(older));
    expect(body.sessions.find((s) => s.session_id === newer)).toEqual({
      session_id: newer,
      title: expect.any(String),
      last_updated: expect.stringMatching(ISO),
      turn_count: 1,
      last_state: "completed",
    });
  });

  it("reflects new, changed and deleted sessions on the next read", async () => {
    const ids = async () =>
      (
        (await api(h, "/api/chat/sessions?limit=200", { token: ALICE_TOKEN })).json as {
          sessions: { session_id: string }[];
        }
      ).sessions.map((s) => s.session_id);
    const before = await ids();
    const sessionId = await newSession(h, ALICE);
    expect(before).not.toContain(sessionId);
    expect(await ids()).toContain(sessionId);
    await prompt(h, ALICE, sessionId, "bump");
    await completed(sessionId);
    expect((await ids())[0]).toBe(sessionId);
    await api(h, `/api/chat/sessions/${sessionId}`, { method: "DELETE", token: ALICE_TOKEN });
    expect(await ids()).not.toContain(sessionId);
  });

  it("honours limit", async () => {
    await newSession(h, ALICE);
    await newSession(h, ALICE);
    const r = await api(h, "/api/chat/sessions?limit=1", { token: ALICE_TOKEN });
    expect((r.json as { sessions: unknown[] }).sessions).toHaveLength(1);
  });

  it("parked=true narrows to sessions waiting on the operator", async () => {
    const parked = await newSession(h, ALICE, "/ask which colour?");
    await completed(parked, "input-required");
    const done = await newSession(h, ALICE, "plain");
    await completed(done);
    const r = await api(h, "/api/chat/sessions?parked=true&limit=200", { token: ALICE_TOKEN });
    const rows = (r.json as { sessions: { session_id: string; last_state: string }[] }).sessions;
    expect(rows.map((s) => s.session_id)).toContain(parked);
    expect(rows.map((s) => s.session_id)).not.toContain(done);
    expect(rows.every((s) => s.last_state === "input-required")).toBe(true);
  });
});

describe("GET /api/chat/sessions/{id}/turns", () => {
  it("gives one A2A task per turn, history opening with the message as shown", async () => {
    const sessionId = await newSession(h, ALICE);
    await prompt(h, ALICE, sessionId, "model-facing text", { display: "what the operator typed" });
    await completed(sessionId);
    const r = await api(h, `/api/chat/sessions/${sessionId}/turns?limit=50`, { token: ALICE_TOKEN });
    expect(r.status).toBe(200);
    const { turns } = r.json as { turns: Record<string, unknown>[] };
    expect(turns).toHaveLength(1);
    const t = turns[0]!;
    // Example: {"task_id":"t1","state":"completed","last_updated":"…Z","text":"…","status":{"state":"completed","timestamp":"…Z"},
    //           "artifacts":[{"artifactId":"t1-answer","name":"answer","parts":[{"kind":"text","text":"…"}]}],
    //           "history":[{"kind":"message","role":"user","parts":[{"kind":"text","text":"what the operator typed"}],…},…]}
    expect(t).toMatchObject({
      kind: "task",
      task_id: expect.any(String),
      contextId: sessionId,
      state: "completed",
      last_updated: expect.stringMatching(ISO),
      status: { state: "completed", timestamp: expect.stringMatching(ISO) },
    });
    expect(t.id).toBe(t.task_id);
    const history = t.history as { role: string; parts: { kind: string; text: string }[] }[];
    expect(history[0]).toMatchObject({
      kind: "message",
      role: "user",
      parts: [{ kind: "text", text: "what the operator typed" }],
    });
    const artifacts = t.artifacts as { parts: { kind: string; text: string }[] }[];
    expect(artifacts).toHaveLength(1);
    const answer = artifacts[0]!.parts.map((p) => p.text).join("\n\n");
    expect(answer.length).toBeGreaterThan(0);
    expect(t.text).toBe(answer);
  });

  it("shows an in-flight turn with partial artifacts and a non-terminal state", async () => {
    const sessionId = await newSession(h, ALICE);
    await prompt(h, ALICE, sessionId, "/stream 200 10");
    let seen: { state: string; text: string; status: { state: string } } | undefined;
    await vi.waitFor(
      async () => {
        const r = await api(h, `/api/chat/sessions/${sessionId}/turns`, { token: ALICE_TOKEN });
        const t = (r.json as { turns: { state: string; text: string; status: { state: string } }[] })
          .turns[0];
        expect(t?.text.length ?? 0).toBeGreaterThan(0);
        seen = t;
      },
      { timeout: 10_000, interval: 20 },
    );
    expect(seen?.state).toBe("working");
    expect(seen?.status.state).toBe("working");
    await h.host.call(ALICE, "session.cancel", { sessionId });
    await completed(sessionId, "cancelled");
    const r = await api(h, `/api/chat/sessions/${sessionId}/turns`, { token: ALICE_TOKEN });
    const t = (r.json as { turns: { state: string; text: string }[] }).turns[0]!;
    expect(t.state).toBe("canceled");
    expect(t.text.startsWith(seen!.text)).toBe(true);
  });

  it("lists turns newest first and honours limit", async () => {
    const sessionId = await newSession(h, ALICE, "one");
    await completed(sessionId);
    await prompt(h, ALICE, sessionId, "/fail");
    await completed(sessionId, "failed");
    const r = await api(h, `/api/chat/sessions/${sessionId}/turns?limit=1`, { token: ALICE_TOKEN });
    const { turns } = r.json as { turns: { state: string }[] };
    expect(turns.map((t) => t.state)).toEqual(["failed"]);
  });
});

describe("DELETE /api/chat/sessions/{id}", () => {
  it("retires the session: later reads are gone", async () => {
    const sessionId = await newSession(h, ALICE, "bye");
    await completed(sessionId);
    const r = await api(h, `/api/chat/sessions/${sessionId}`, { method: "DELETE", token: ALICE_TOKEN });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ deleted: true });
    const after = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
    expect([404, 410]).toContain(after.status);
    await expect(h.store.isRetired(sessionId)).resolves.toBe(true);
  });

  it("retire=false clears the history and keeps the id; refused while a turn runs", async () => {
    const sessionId = await newSession(h, ALICE);
    await prompt(h, ALICE, sessionId, "/sleep 5000");
    await vi.waitFor(async () => expect(await settledState(h, sessionId)).toBe("working"), { interval: 20 });
    const busy = await api(h, `/api/chat/sessions/${sessionId}?retire=false`, {
      method: "DELETE",
      token: ALICE_TOKEN,
    });
    expect(busy.status).toBe(409);
    expect(busy.json).toEqual({ error: "session_busy" });
    await h.host.call(ALICE, "session.cancel", { sessionId });
    await completed(sessionId, "cancelled");
    const r = await api(h, `/api/chat/sessions/${sessionId}?retire=false`, {
      method: "DELETE",
      token: ALICE_TOKEN,
    });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ cleared: true, epoch: expect.any(String) });
    const view = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
    expect(view.status).toBe(200);
    expect((view.json as { messages: unknown[] }).messages).toEqual([]);
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
    //           "pending_questions":[{"id":"i1","kind":"approval","turn_id":"t2","requested_at_ms":4,"action":"deploy"}]}
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
    const pending = v.pending_questions as { id: string; kind: string; action?: string }[];
    expect(pending).toEqual([
      expect.objectContaining({
        id: expect.any(String),
        kind: "approval",
        turn_id: expect.any(String),
        action: "deploy",
      }),
    ]);
    const ts = v.messages.map((m) => m.ts_ms as number);
    expect([...ts].sort((a, b) => a - b)).toEqual(ts);
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
    const id = (view.json as { pending_questions: { id: string }[] }).pending_questions[0]!.id;
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
    const q = (view.json as { pending_questions: { id: string; kind: string }[] }).pending_questions[0]!;
    expect(q.kind).toBe("question");
    const r = await api(h, `/v1/interactions/${q.id}/answer`, {
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
    const r = await api(h, "/metrics", { token: ALICE_TOKEN });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^text\/plain/);
    expect(r.text).toMatch(/sessionmux_http_requests_total\{route="GET \/healthz",status="200"\} \d+/);
    expect(r.text).toContain("sessionmux_appends_total");
  });
});
