import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { ALICE, api, newSession } from "./http-client.js";

let h: TestHost;
let sessionId: string;
beforeAll(async () => {
  h = await startTestHost();
  sessionId = await newSession(h, ALICE);
});
afterAll(async () => {
  await h?.dispose();
});

/** Writes raw bytes on a fresh socket and collects whatever comes back until the host closes it. */
function raw(bytes: string | Buffer, { endAfterWrite = true } = {}): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(h.port, "127.0.0.1");
    const parts: Buffer[] = [];
    socket.on("data", (c: Buffer) => {
      parts.push(c);
      if (!endAfterWrite && Buffer.concat(parts).includes("\r\n\r\n")) socket.destroy();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => resolve(Buffer.concat(parts).toString("latin1")));
    socket.write(bytes, () => {
      if (endAfterWrite) socket.end();
    });
  });
}

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  api(h, path, { method: "POST", token: ALICE_TOKEN, body, headers });

describe("bad input over HTTP", () => {
  it("malformed JSON and wrong shapes are 400 bad_request", async () => {
    for (const body of ["{", "[]", "42", "null", '"text"']) {
      const r = await post(`/v1/sessions/${sessionId}/seen`, body);
      expect(r.status, body).toBe(400);
      expect(r.json).toMatchObject({ error: "bad_request" });
    }
    for (const body of [{}, { outcome: "maybe" }, { answer: 7 }, { outcome: "approve", extra: 1 }]) {
      const r = await post("/v1/interactions/i1/answer", body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json).toMatchObject({ error: "bad_request" });
    }
  });

  it("bad query values and malformed ids are 400, unknown routes and methods 404", async () => {
    for (const path of [
      "/api/chat/sessions?limit=0",
      "/api/chat/sessions?limit=abc",
      "/api/chat/sessions?limit=1e9",
      "/api/chat/sessions?parked=maybe",
      `/api/chat/sessions/${sessionId}/turns?limit=-1`,
      "/v1/sessions/%E2%80%AEevil",
      "/v1/sessions/a%00b",
      `/v1/sessions/${"x".repeat(300)}`,
      "/v1/sessions/%zz",
    ]) {
      const r = await api(h, path, { token: ALICE_TOKEN });
      expect(r.status, path).toBe(400);
      expect(r.json).toMatchObject({ error: "bad_request" });
    }
    for (const [method, path] of [
      ["GET", "/v1/nothing"],
      ["PUT", "/api/chat/sessions"],
      ["POST", `/v1/sessions/${sessionId}`],
      ["GET", "/v1/sessions"],
      ["GET", "/api/remote.mux"],
    ] as const) {
      const r = await api(h, path, { method, token: ALICE_TOKEN });
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.json).toEqual({ error: "not_found" });
    }
  });

  it("refuses a foreign Origin with 403 even with a valid token; the request's own origin passes", async () => {
    const foreign = await api(h, "/api/chat/sessions", {
      token: ALICE_TOKEN,
      headers: { origin: "https://evil.example" },
    });
    expect(foreign.status).toBe(403);
    expect(foreign.json).toEqual({ error: "forbidden_origin" });
    const own = await api(h, "/api/chat/sessions", {
      token: ALICE_TOKEN,
      headers: { origin: `http://127.0.0.1:${h.port}` },
    });
    expect(own.status).toBe(200);
  });

  it("checks auth before the route: an unknown API route without a token is 401", async () => {
    const r = await api(h, "/v1/nothing");
    expect(r.status).toBe(401);
  });

  it("a body over 1 MiB is 413 payload_too_large, declared or streamed, and the host stays up", async () => {
    const declared = await post(`/v1/sessions/${sessionId}/seen`, Buffer.alloc(1024 * 1024 + 1, 32));
    expect(declared.status).toBe(413);
    expect(declared.json).toEqual({ error: "payload_too_large" });
    // Chunked: no length up front; the host stops at the limit and answers without reading the rest.
    const head =
      `POST /v1/sessions/${sessionId}/seen HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${ALICE_TOKEN}\r\n` +
      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    const chunk = Buffer.alloc(256 * 1024, 32);
    const chunks = Array.from({ length: 5 }, () =>
      Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")]),
    );
    const reply = await raw(Buffer.concat([Buffer.from(head), ...chunks]), { endAfterWrite: false });
    expect(reply).toMatch(/^HTTP\/1\.1 413 /);
    expect((await api(h, "/healthz")).status).toBe(200);
  });

  it("2,000 headers are refused by the parser, and the host stays up", async () => {
    const headers = Array.from({ length: 2000 }, (_, i) => `X-H${i}: v\r\n`).join("");
    const reply = await raw(`GET /api/chat/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}\r\n`);
    expect(reply).toMatch(/^HTTP\/1\.1 4\d\d /);
    expect((await api(h, "/healthz")).status).toBe(200);
  });

  it("a garbage request line gets a 400 and the host stays up", async () => {
    const reply = await raw("\x00\x01 nonsense\r\n\r\n");
    expect(reply === "" || /^HTTP\/1\.1 400 /.test(reply)).toBe(true);
    expect((await api(h, "/healthz")).status).toBe(200);
  });

  it("never answers a client mistake with a 5xx", async () => {
    const attempts: [string, string, unknown][] = [
      ["POST", "/v1/attachments", "x"],
      ["POST", `/v1/sessions/${sessionId}/seen`, { completion_settled_at_ms: Number.MAX_SAFE_INTEGER }],
      ["POST", "/v1/sessions/nope/seen", { completion_settled_at_ms: 1 }],
      ["DELETE", "/api/chat/sessions/nope", undefined],
      ["DELETE", "/api/chat/sessions/nope?retire=false", undefined],
      ["GET", "/api/chat/sessions/nope/turns", undefined],
      ["POST", "/v1/interactions/nope/answer", { answer: "x".repeat(20_000) }],
      ["POST", "/v1/interactions/nope/answer", '{"__proto__":{"outcome":"approve"}}'],
    ];
    for (const [method, path, body] of attempts) {
      const r = await api(h, path, { method, token: ALICE_TOKEN, body });
      expect(r.status, `${method} ${path}`).toBeGreaterThanOrEqual(200);
      expect(r.status, `${method} ${path}`).toBeLessThan(500);
    }
  });
});
