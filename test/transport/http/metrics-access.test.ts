import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { api } from "./http-client.js";

const METRICS_TOKEN = "scraper-secret";

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost({ metricsToken: METRICS_TOKEN });
});
afterAll(async () => {
  await h?.dispose();
});

describe("GET /metrics shows every principal's activity: admin or the metrics token only", () => {
  it("refuses no token and a wrong one with 401, an ordinary principal with 403 forbidden", async () => {
    expect((await api(h, "/metrics")).status).toBe(401);
    expect((await api(h, "/metrics", { token: "wrong" })).status).toBe(401);
    const alice = await api(h, "/metrics", { token: ALICE_TOKEN });
    expect(alice.status).toBe(403);
    expect(alice.json).toEqual({ error: "forbidden" });
  });

  it("serves the admin and the metrics token", async () => {
    for (const token of [ADMIN_TOKEN, METRICS_TOKEN]) {
      const r = await api(h, "/metrics", { token });
      expect(r.status).toBe(200);
      expect(r.text).toContain("sessionmux_connections");
    }
  });

  it("the metrics token is no principal: every other route refuses it", async () => {
    expect((await api(h, "/api/chat/sessions", { token: METRICS_TOKEN })).status).toBe(401);
  });
});
