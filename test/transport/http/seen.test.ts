import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { ALICE, api, newSession, prompt, settledState } from "./http-client.js";

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost();
});
afterAll(async () => {
  await h?.dispose();
});

interface View {
  has_unseen_completion: boolean;
  completion_settled_at_ms: number | null;
}

async function view(sessionId: string): Promise<View> {
  const r = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
  expect(r.status).toBe(200);
  return r.json as View;
}

function seen(sessionId: string, at: unknown) {
  return api(h, `/v1/sessions/${sessionId}/seen`, {
    method: "POST",
    token: ALICE_TOKEN,
    body: { completion_settled_at_ms: at },
  });
}

async function turnsDone(sessionId: string, count: number) {
  await vi.waitFor(
    async () => {
      const p = await h.store.projection(sessionId);
      expect(p?.turnCount).toBe(count);
      expect(await settledState(h, sessionId)).toBe("completed");
    },
    { timeout: 10_000, interval: 20 },
  );
}

describe("POST /v1/sessions/{id}/seen", () => {
  it("clears the unseen mark for the newest completion", async () => {
    const sessionId = await newSession(h, ALICE, "hi");
    await turnsDone(sessionId, 1);
    const v = await view(sessionId);
    expect(v.has_unseen_completion).toBe(true);
    expect(v.completion_settled_at_ms).toEqual(expect.any(Number));
    const r = await seen(sessionId, v.completion_settled_at_ms);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ has_unseen_completion: false });
    expect((await view(sessionId)).has_unseen_completion).toBe(false);
  });

  it("a stale ack from an older tab does not hide a newer completion", async () => {
    const sessionId = await newSession(h, ALICE, "first");
    await turnsDone(sessionId, 1);
    const stale = (await view(sessionId)).completion_settled_at_ms;
    await prompt(h, ALICE, sessionId, "second");
    await turnsDone(sessionId, 2);
    const fresh = await view(sessionId);
    expect(fresh.completion_settled_at_ms).not.toBe(stale);
    const r = await seen(sessionId, stale);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ has_unseen_completion: true });
    expect((await view(sessionId)).has_unseen_completion).toBe(true);
    const ok = await seen(sessionId, fresh.completion_settled_at_ms);
    expect(ok.json).toEqual({ has_unseen_completion: false });
  });

  const NOT_A_TIME = {
    error: "bad_request",
    field: "/completion_settled_at_ms",
    message: "completion_settled_at_ms must be a non-negative number",
  };

  it("refuses a body without a usable timestamp, and takes 0", async () => {
    const sessionId = await newSession(h, ALICE);
    for (const bad of ["yesterday", -1, null]) {
      const r = await seen(sessionId, bad);
      expect(r.status).toBe(400);
      expect(r.json).toEqual(NOT_A_TIME);
    }
    // JSON has no Infinity, but a number too large to hold parses as one
    const huge = await api(h, `/v1/sessions/${sessionId}/seen`, {
      method: "POST",
      token: ALICE_TOKEN,
      body: '{"completion_settled_at_ms": 1e999}',
    });
    expect([huge.status, huge.json]).toEqual([400, NOT_A_TIME]);
    const zero = await seen(sessionId, 0);
    expect([zero.status, zero.json]).toEqual([200, { has_unseen_completion: false }]);
  });
});
