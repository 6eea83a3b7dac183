import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { ALICE, api, type Call, newSession, settledState } from "./http-client.js";

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost();
});
afterAll(async () => {
  await h?.dispose();
});

/** Alice's resource the route acts on: a session, and the pending approval or attachment where it needs one. */
interface Target {
  sessionId: string;
  interactionId: string;
  attachmentId: string;
}

async function aliceTarget(withApproval: boolean): Promise<Target> {
  const sessionId = await newSession(h, ALICE, withApproval ? "/approve run tests" : "hello");
  const want = withApproval ? "input-required" : "completed";
  await vi.waitFor(async () => expect(await settledState(h, sessionId)).toBe(want), {
    timeout: 10_000,
    interval: 20,
  });
  const interactionId = withApproval
    ? (h.host.live.interactions().find((i) => i.sessionId === sessionId)?.interactionId ?? "")
    : "none";
  const attachmentId = await h.store.putAttachment({
    owner: "alice",
    name: "a.txt",
    type: "text/plain",
    bytes: new Uint8Array([1]),
  });
  return { sessionId, interactionId, attachmentId };
}

const MISSING: Target = {
  sessionId: "no-such-session",
  interactionId: "no-such-interaction",
  attachmentId: "no-such-attachment",
};

interface RouteCase {
  name: string;
  /** Needs a pending approval on the target session. */
  approval?: boolean;
  /** Acting on another principal's target must read exactly like acting on a missing one. */
  owned: boolean;
  call(t: Target): Call & { path: string };
}

const ROUTES: RouteCase[] = [
  { name: "GET /api/chat/sessions", owned: false, call: () => ({ path: "/api/chat/sessions" }) },
  { name: "GET turns", owned: true, call: (t) => ({ path: `/api/chat/sessions/${t.sessionId}/turns` }) },
  {
    name: "DELETE session",
    owned: true,
    call: (t) => ({ path: `/api/chat/sessions/${t.sessionId}`, method: "DELETE" }),
  },
  {
    name: "DELETE session retire=false",
    owned: true,
    call: (t) => ({ path: `/api/chat/sessions/${t.sessionId}?retire=false`, method: "DELETE" }),
  },
  { name: "GET /v1/sessions/{id}", owned: true, call: (t) => ({ path: `/v1/sessions/${t.sessionId}` }) },
  {
    name: "POST answer",
    owned: true,
    approval: true,
    call: (t) => ({
      path: `/v1/interactions/${t.interactionId}/answer`,
      method: "POST",
      body: { outcome: "approve" },
    }),
  },
  {
    name: "POST seen",
    owned: true,
    call: (t) => ({
      path: `/v1/sessions/${t.sessionId}/seen`,
      method: "POST",
      body: { completion_settled_at_ms: 1 },
    }),
  },
  {
    name: "POST attachment",
    owned: false,
    call: () => ({
      path: "/v1/attachments",
      method: "POST",
      body: Buffer.from("x"),
      headers: { "content-type": "text/plain" },
    }),
  },
  { name: "GET attachment", owned: true, call: (t) => ({ path: `/v1/attachments/${t.attachmentId}` }) },
];

describe.each(ROUTES)("auth matrix: $name", (route) => {
  it("refuses no token, a wrong token, a garbled header and a token in the URL with 401", async () => {
    const t = await aliceTarget(route.approval === true);
    const { path, ...call } = route.call(t);
    const attempts: Call[] = [
      { ...call },
      { ...call, token: "wrong-token" },
      { ...call, headers: { ...call.headers, authorization: `Basic ${ALICE_TOKEN}` } },
      { ...call, headers: { ...call.headers, authorization: "Bearer" } },
    ];
    for (const attempt of attempts) {
      const r = await api(h, path, attempt);
      expect(r.status).toBe(401);
      expect(r.json).toEqual({ error: "unauthorized" });
    }
    const sep = path.includes("?") ? "&" : "?";
    const inUrl = await api(h, `${path}${sep}token=${ALICE_TOKEN}&access_token=${ALICE_TOKEN}`, call);
    expect(inUrl.status).toBe(401);
  });

  it("lets the owner and the admin through", async () => {
    for (const token of [ALICE_TOKEN, ADMIN_TOKEN]) {
      const t = await aliceTarget(route.approval === true);
      const { path, ...call } = route.call(t);
      const r = await api(h, path, { ...call, token });
      expect(r.status, `${route.name} as ${token}`).toBeGreaterThanOrEqual(200);
      expect(r.status, `${route.name} as ${token}`).toBeLessThan(300);
    }
  });
});

describe.each(ROUTES.filter((r) => r.owned))("auth matrix: $name", (route) => {
  it("answers another principal exactly like a missing resource", async () => {
    const t = await aliceTarget(route.approval === true);
    const { path, ...call } = route.call(t);
    const foreign = await api(h, path, { ...call, token: BOB_TOKEN });
    const { path: missingPath, ...missingCall } = route.call(MISSING);
    const missing = await api(h, missingPath, { ...missingCall, token: BOB_TOKEN });
    expect(foreign.status).toBeGreaterThanOrEqual(400);
    expect(foreign.status).toBeLessThan(500);
    expect(foreign.status).toBe(missing.status);
    expect(foreign.text).toBe(missing.text);
    // …and Bob's attempt changed nothing: Alice still reads her session.
    const still = await api(h, `/v1/sessions/${t.sessionId}`, { token: ALICE_TOKEN });
    expect(still.status).toBe(200);
  });
});

describe("principals in the session list", () => {
  it("shows each principal only their own sessions; the admin sees all", async () => {
    const t = await aliceTarget(false);
    const ids = async (token: string) =>
      (
        (await api(h, "/api/chat/sessions?limit=200", { token })).json as {
          sessions: { session_id: string }[];
        }
      ).sessions.map((s) => s.session_id);
    expect(await ids(ALICE_TOKEN)).toContain(t.sessionId);
    expect(await ids(BOB_TOKEN)).not.toContain(t.sessionId);
    expect(await ids(ADMIN_TOKEN)).toContain(t.sessionId);
  });
});
