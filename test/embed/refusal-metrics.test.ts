import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { appAuthenticate, mountedApp, upgradeStatus } from "./app-fixture.js";

const cleanups = cleanupsAfterEach();

/** The app's auth, where `user:slow` never settles (a session lookup that hangs). */
function authenticate(req: IncomingMessage) {
  if (req.headers.authorization === "Bearer user:slow") return new Promise<undefined>(() => undefined);
  return appAuthenticate(req);
}

async function refusedSeries(authority: string): Promise<string[]> {
  const res = await fetch(`http://${authority}/chat/metrics`, {
    headers: { authorization: "Bearer user:root" },
  });
  expect(res.status).toBe(200);
  // every code is served from 0: the ones that counted a refusal
  return (await res.text())
    .split("\n")
    .filter((line) => line.startsWith("sessionmux_refused_total") && !line.endsWith(" 0"));
}

describe("a mounted host counts what it refused before any route or call ran", () => {
  it("by code: unauthorized and forbidden_origin from HTTP and upgrades, overloaded while the app's authenticate hangs", async () => {
    const { authority } = await mountedApp(cleanups, { authenticate, authenticateLimits: { timeoutMs: 50 } });
    const mux = `ws://${authority}/chat/api/remote.mux`;
    expect(await refusedSeries(authority)).toEqual([]);
    const sessions = (authorization: string) =>
      fetch(`http://${authority}/chat/api/chat/sessions`, { headers: { authorization } });
    expect((await sessions("Bearer wrong")).status).toBe(401);
    expect(await upgradeStatus(mux, { authorization: "Bearer wrong" })).toBe(401);
    expect(await upgradeStatus(mux)).toBe(401);
    expect(
      await upgradeStatus(mux, { authorization: "Bearer user:alice", origin: "https://elsewhere.example" }),
    ).toBe(403);
    // a scraper's wrong token or Origin counted nothing before, and was not logged
    const scrape = (headers: Record<string, string>) =>
      fetch(`http://${authority}/chat/metrics`, { headers });
    expect((await scrape({ authorization: "Bearer wrong" })).status).toBe(401);
    expect(
      (await scrape({ authorization: "Bearer user:root", origin: "https://elsewhere.example" })).status,
    ).toBe(403);
    expect((await sessions("Bearer user:slow")).status).toBe(503);
    expect(await upgradeStatus(mux, { authorization: "Bearer user:slow" })).toBe(503);
    // what was let in counts nothing
    expect((await sessions("Bearer user:alice")).status).toBe(200);
    expect(await upgradeStatus(mux, { authorization: "Bearer user:alice" })).toBe(101);
    expect((await refusedSeries(authority)).sort()).toEqual([
      'sessionmux_refused_total{code="forbidden_origin"} 2',
      'sessionmux_refused_total{code="overloaded"} 2',
      'sessionmux_refused_total{code="unauthorized"} 4',
    ]);
  });
});
