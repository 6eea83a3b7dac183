import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { ALICE, api, newSession, waitForState } from "./http-client.js";

/** `GET /v1/usage` (protocol-v1 §8) on a real host: the caller's stored bytes and its bound. */

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost({ principals: { maxStoredBytesPerPrincipal: 50_000 } });
});
afterAll(async () => {
  await h?.dispose();
});

const counted = (text: string, route: string, status: number) =>
  new RegExp(`sessionmux_http_requests_total\\{route="${route}",status="${status}"\\} (\\d+)\\n`).exec(
    text,
  )?.[1];

describe("GET /v1/usage", () => {
  it("answers the caller's stored bytes, as the quota counts them, and its bound", async () => {
    const sessionId = await newSession(h, ALICE, "something to store");
    await waitForState(h, sessionId, "completed");
    const { storedBytes } = await h.host.storageUsage(ALICE);
    expect(storedBytes).toBeGreaterThan(0);
    const r = await api(h, "/v1/usage", { token: ALICE_TOKEN });
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^application\/json/);
    expect(r.json).toEqual({ principal: "alice", stored_bytes: storedBytes, max_stored_bytes: 50_000 });
  });

  it("answers the admin without a bound", async () => {
    const r = await api(h, "/v1/usage", { token: ADMIN_TOKEN });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ principal: "admin", max_stored_bytes: null });
  });

  it("is the path exactly, for GET only, and counted under its own route", async () => {
    for (const path of ["/v1/usage/", "/v1/usage/x", "/v1/v1/usage"]) {
      const r = await api(h, path, { token: ALICE_TOKEN });
      expect([path, r.status]).toEqual([path, 404]);
    }
    const post = await api(h, "/v1/usage", { method: "POST", token: ALICE_TOKEN, body: {} });
    expect(post.status).toBe(404);
    const before = Number(counted(await h.metrics.registry.metrics(), "GET /v1/usage", 200) ?? 0);
    await api(h, "/v1/usage", { token: ALICE_TOKEN });
    expect(Number(counted(await h.metrics.registry.metrics(), "GET /v1/usage", 200))).toBe(before + 1);
  });
});
