import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { ALICE, api, newSession, prompt, settledState, waitForState } from "./http-client.js";

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost();
});
afterAll(async () => {
  await h?.dispose();
});

const completed = (sessionId: string, state = "completed") => waitForState(h, sessionId, state);

describe("GET /api/chat/sessions", () => {
  it("lists the principal's sessions newest first in the §8 shape", async () => {
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

  it("leaves the caller's dismissed sessions out unless asked for, and dismissed=true lists only them", async () => {
    const kept = await newSession(h, ALICE, "kept");
    await completed(kept);
    const dismissed = await newSession(h, ALICE, "/ask which colour?");
    await completed(dismissed, "input-required");
    await h.host.call(ALICE, "session.dismiss", { sessionId: dismissed });
    // no write between these reads: each query is answered for itself, never from another's cache
    const ids = async (query: string) =>
      (
        (await api(h, `/api/chat/sessions?${query}`, { token: ALICE_TOKEN })).json as {
          sessions: { session_id: string }[];
        }
      ).sessions.map((s) => s.session_id);
    const plain = await ids("limit=200");
    expect(plain).toContain(kept);
    expect(plain).not.toContain(dismissed);
    expect(await ids("limit=200&dismissed=true")).toEqual([dismissed]);
    expect(await ids("limit=200&dismissed=true&parked=true")).toEqual([dismissed]);
    expect(await ids("limit=200&parked=true")).not.toContain(dismissed);
    expect(await ids("limit=200&parked=true")).not.toContain(kept);
    expect(await ids("limit=1")).toEqual([plain[0]]);
    expect(await ids("limit=200&dismissed=false")).toEqual(plain);
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

describe("the chat routes' metrics", () => {
  it("counts each request under its route's name", async () => {
    const counted = async (route: string, status: number) =>
      Number(
        new RegExp(`sessionmux_http_requests_total\\{route="${route}",status="${status}"\\} (\\d+)\\n`).exec(
          await h.metrics.registry.metrics(),
        )?.[1] ?? 0,
      );
    const sessionId = await newSession(h, ALICE, "counted");
    await completed(sessionId);
    const routes: [string, string, string][] = [
      ["GET /api/chat/sessions", "GET", "/api/chat/sessions"],
      ["GET /api/chat/sessions/:id/turns", "GET", `/api/chat/sessions/${sessionId}/turns`],
      ["DELETE /api/chat/sessions/:id", "DELETE", `/api/chat/sessions/${sessionId}`],
    ];
    for (const [route, method, path] of routes) {
      const before = await counted(route, 200);
      expect((await api(h, path, { method, token: ALICE_TOKEN })).status).toBe(200);
      expect([route, await counted(route, 200)]).toEqual([route, before + 1]);
    }
  });
});

describe("the chat routes' paths", () => {
  it("match the whole path only: a longer or prefixed one is not found and changes nothing", async () => {
    const sessionId = await newSession(h, ALICE, "kept");
    await completed(sessionId);
    for (const [method, path] of [
      ["GET", "/v1/api/chat/sessions"],
      ["GET", `/v1/api/chat/sessions/${sessionId}/turns`],
      ["GET", `/api/chat/sessions/${sessionId}/turns/x`],
      ["DELETE", `/v1/api/chat/sessions/${sessionId}`],
      ["DELETE", `/api/chat/sessions/${sessionId}/turns`],
    ] as const) {
      const r = await api(h, path, { method, token: ALICE_TOKEN });
      expect([method, path, r.status]).toEqual([method, path, 404]);
    }
    await expect(h.store.isRetired(sessionId)).resolves.toBe(false);
    expect(await settledState(h, sessionId)).toBe("completed");
  });

  it("name the id they refuse", async () => {
    for (const [method, path] of [
      ["GET", "/api/chat/sessions/bad!id/turns"],
      ["DELETE", "/api/chat/sessions/bad!id"],
    ] as const) {
      const r = await api(h, path, { method, token: ALICE_TOKEN });
      expect([method, r.status, r.json]).toEqual([
        method,
        400,
        {
          error: "bad_request",
          field: "sessionId",
          message: "sessionId must be 1-128 chars of [A-Za-z0-9_-]",
        },
      ]);
    }
  });
});
