import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN } from "../../../src/host/principal.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { api } from "./http-client.js";
import { toolTurn } from "./tool-turns.js";

/** The path ids and query values the routes take: each bound on both of its sides, and what a refusal names. */

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost();
});
afterAll(async () => {
  await h?.dispose();
});

let counter = 0;
/** An admin session with one tool turn: 4 events after its creation, 5 in all. */
async function session(): Promise<string> {
  const sessionId = `q${++counter}`;
  await h.host.call(ADMIN, "session.create", { sessionId });
  expect((await h.store.append(sessionId, toolTurn("t", 1))).status).toBe("appended");
  return sessionId;
}

const get = (path: string) => api(h, path, { token: ADMIN_TOKEN });
const del = (path: string) => api(h, path, { method: "DELETE", token: ADMIN_TOKEN });

describe("integer query values", () => {
  it("takes each bound itself and refuses one past it, naming the field", async () => {
    const sessionId = await session();
    const seqs = async (query: string) => {
      const r = await get(`/v1/sessions/${sessionId}/events?${query}`);
      expect(r.status, query).toBe(200);
      return (r.json as { events: { seq: number }[] }).events.map((e) => e.seq);
    };
    expect(await seqs("limit=1")).toEqual([1]);
    expect(await seqs("limit=500")).toEqual([1, 2, 3, 4, 5]);
    expect(await seqs("after_seq=0&limit=10")).toEqual([1, 2, 3, 4, 5]);
    expect(await seqs("after_seq=4")).toEqual([5]);
    for (const [query, field, range] of [
      ["limit=0", "limit", "1 to 500"],
      ["limit=501", "limit", "1 to 500"],
      ["after_seq=-1", "after_seq", "0 to 9999999999"],
    ]) {
      const r = await get(`/v1/sessions/${sessionId}/events?${query}`);
      expect([r.status, r.json], query).toEqual([
        400,
        { error: "bad_request", field, message: `${field} must be a whole number from ${range}` },
      ]);
    }
  });

  it("refuses anything but 1 to 10 digits, whatever surrounds them", async () => {
    const sessionId = await session();
    for (const query of [
      "limit=5x",
      "limit=x5",
      "limit=",
      "limit=2.5",
      "after_seq=1a",
      "after_seq=a1",
      "after_seq=%201",
      "after_seq=12345678901",
    ]) {
      const r = await get(`/v1/sessions/${sessionId}/events?${query}`);
      const field = query.slice(0, query.indexOf("="));
      const range = field === "limit" ? "1 to 500" : "0 to 9999999999";
      expect([r.status, r.json], query).toEqual([
        400,
        { error: "bad_request", field, message: `${field} must be a whole number from ${range}` },
      ]);
    }
    // ten digits are a number: past the head here, not malformed
    const far = await get(`/v1/sessions/${sessionId}/events?after_seq=9999999999`);
    expect([far.status, far.json]).toMatchObject([409, { error: "cursor_ahead", head_seq: 5 }]);
  });
});

describe("boolean query values", () => {
  it("reads true and 1 as yes, false and 0 as no, and refuses anything else naming the field", async () => {
    const cleared = async (query: string) => {
      const sessionId = await session();
      const r = await del(`/api/chat/sessions/${sessionId}?${query}`);
      expect(r.status, query).toBe(200);
      return r.json;
    };
    for (const query of ["retire=false", "retire=0"])
      expect(await cleared(query), query).toEqual({ cleared: true, epoch: expect.any(String) });
    for (const query of ["retire=true", "retire=1", "other=0"])
      expect(await cleared(query), query).toEqual({ deleted: true });
    const sessionId = await session();
    for (const query of ["retire=yes", "retire=", "retire=TRUE"]) {
      const r = await del(`/api/chat/sessions/${sessionId}?${query}`);
      expect([r.status, r.json], query).toEqual([
        400,
        { error: "bad_request", field: "retire", message: "retire must be true or false" },
      ]);
    }
    expect((await get(`/v1/sessions/${sessionId}`)).status).toBe(200);
  });
});

const NOT_ENCODED = "is not valid percent-encoding";
const NOT_AN_ID = "must be 1-128 chars of [A-Za-z0-9_-]";
const badId = (field: string, message: string) => ({
  error: "bad_request",
  field,
  message: `${field} ${message}`,
});

describe("ids in the path", () => {
  it("decodes percent-encoding, and refuses a bad escape or a character outside the alphabet naming the field", async () => {
    const sessionId = await session();
    const encoded = sessionId.replace("q", "%71");
    expect((await get(`/v1/sessions/${encoded}`)).json).toMatchObject({ id: sessionId });
    for (const [path, message] of [
      ["/v1/sessions/%zz", NOT_ENCODED],
      ["/v1/sessions/a%2Eb", NOT_AN_ID],
      ["/v1/sessions/a%00b", NOT_AN_ID],
    ]) {
      const r = await get(path!);
      expect([r.status, r.json], path).toEqual([400, badId("sessionId", message!)]);
    }
    const answer = await api(h, "/v1/interactions/%E0%A4%A/answer", {
      method: "POST",
      token: ADMIN_TOKEN,
      body: { answer: "x" },
    });
    expect([answer.status, answer.json]).toEqual([400, badId("interactionId", NOT_ENCODED)]);
  });

  it("names the field of a bad id on the log, seen and answer routes, and of an answer's bad body", async () => {
    for (const [path, message] of [
      ["/v1/sessions/%zz/events", NOT_ENCODED],
      ["/v1/sessions/a%2Eb/events", NOT_AN_ID],
    ]) {
      const r = await get(path!);
      expect([r.status, r.json], path).toEqual([400, badId("sessionId", message!)]);
    }
    const seen = await api(h, "/v1/sessions/%zz/seen", {
      method: "POST",
      token: ADMIN_TOKEN,
      body: { completion_settled_at_ms: 1 },
    });
    expect([seen.status, seen.json]).toEqual([400, badId("sessionId", NOT_ENCODED)]);
    const answer = await api(h, "/v1/interactions/i1/answer", {
      method: "POST",
      token: ADMIN_TOKEN,
      body: { outcome: 7 },
    });
    expect([answer.status, answer.json]).toEqual([
      400,
      { error: "bad_request", field: "/outcome", message: 'body/outcome: Expected one of "approve", "deny"' },
    ]);
  });
});

describe("route patterns", () => {
  it("match the whole path: a prefix or a suffix is an unknown route", async () => {
    const sessionId = await session();
    for (const [method, path] of [
      ["GET", `/v1/x/v1/sessions/${sessionId}`],
      ["POST", "/v1/x/v1/interactions/i1/answer"],
      ["POST", "/v1/interactions/i1/answer/x"],
      ["POST", `/v1/x/v1/sessions/${sessionId}/seen`],
      ["POST", `/v1/sessions/${sessionId}/seen/x`],
    ] as const) {
      const body = method === "POST" ? { completion_settled_at_ms: 1, answer: "x" } : undefined;
      const r = await api(h, path, { method, token: ADMIN_TOKEN, ...(body ? { body } : {}) });
      expect([r.status, r.json], path).toEqual([404, { error: "not_found" }]);
    }
  });
});
