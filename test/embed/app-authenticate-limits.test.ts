import type { IncomingMessage } from "node:http";
import { describe, expect, it, vi } from "vitest";
import { AppAuthentication } from "../../src/embed/app-authentication.js";
import { RefusalLog } from "../../src/embed/refusal-log.js";
import type { Principal } from "../../src/host/principal.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { until } from "../support/until.js";
import { mountedApp, upgradeStatus } from "./app-fixture.js";

/**
 * A slow or stuck `authenticate` of the app: the calls in flight are bounded, a request waits a
 * bounded time, and both refusals are 503 `overloaded` (the credentials were never judged), never
 * a 401; a call that settles late frees its place.
 */

const cleanups = cleanupsAfterEach();

/** `Bearer user:<name>`; every call waits until the test lets the calls so far through. */
function heldAuthenticate() {
  const waiting: (() => void)[] = [];
  let calls = 0;
  const authenticate = async (req: IncomingMessage): Promise<Principal | undefined> => {
    calls++;
    await new Promise<void>((resolve) => waiting.push(resolve));
    const name = /^Bearer user:([a-z]+)$/.exec(req.headers.authorization ?? "")?.[1];
    return name ? { name, admin: false } : undefined;
  };
  return {
    authenticate,
    calls: () => calls,
    waiting: () => waiting.length,
    release: () => {
      for (const resolve of waiting.splice(0)) resolve();
    },
  };
}

const usage = (authority: string, name: string) =>
  fetch(`http://${authority}/chat/v1/usage`, { headers: { authorization: `Bearer user:${name}` } });

/** A request as the transports hand it over, carrying `Bearer user:<name>`. */
const requestOf = (name: string) =>
  ({ url: "/v1/usage", headers: { authorization: `Bearer user:${name}` }, socket: {} }) as IncomingMessage;

describe("the app's authenticate, bounded", () => {
  it("by default holds 1,024 calls in flight and waits 10 s for one, then refuses overloaded, saying which", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    cleanups.push(() => {
      vi.useRealTimers();
    });
    const held = heldAuthenticate();
    cleanups.push(() => held.release());
    const auth = new AppAuthentication(held.authenticate, new RefusalLog(capturedLogger().logger));
    const first = Array.from({ length: 1_024 }, () => auth.settle(requestOf("alice")));
    expect(held.waiting()).toBe(1_024);
    const refused = auth.settle(requestOf("bob"));
    // refused without a call (checked before waiting: a call made would hold the answer)
    expect(held.calls()).toBe(1_024);
    expect(await refused).toMatchObject({
      code: "overloaded",
      message: "1024 authentications already in flight; retry shortly",
    });
    // just short of the wait: every call still answers its request
    await vi.advanceTimersByTimeAsync(9_999);
    held.release();
    expect(await Promise.all(first)).toEqual(new Array(1_024).fill(null));

    const request = requestOf("carol");
    const late = auth.settle(request);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(await late).toMatchObject({
      code: "overloaded",
      message: "authentication did not answer in time; retry shortly",
    });
    expect(auth.resolve(request)).toBeUndefined();
  });

  it("past the calls in flight, a request is refused overloaded without a call; they go on once it settles", async () => {
    const held = heldAuthenticate();
    const { authority } = await mountedApp(cleanups, {
      authenticate: held.authenticate,
      authenticateLimits: { maxPending: 2, timeoutMs: 60_000 },
    });
    // first of the cleanups: a failed test leaves no call held
    cleanups.push(() => held.release());
    const url = `ws://${authority}/chat/api/remote.mux`;
    const first = upgradeStatus(url, { authorization: "Bearer user:alice" });
    const second = usage(authority, "bob");
    await until(() => held.waiting() === 2, 10_000, "two calls of authenticate in flight");

    const refused = await usage(authority, "carol");
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({ error: "overloaded" });
    expect(await upgradeStatus(url, { authorization: "Bearer user:carol" })).toBe(503);
    expect(held.calls()).toBe(2);

    held.release();
    expect(await first).toBe(101);
    expect((await second).status).toBe(200);
    const later = usage(authority, "carol");
    await until(() => held.waiting() === 1, 10_000, "the next call");
    held.release();
    expect((await later).status).toBe(200);
  });

  it("a request that waits past the timeout is refused overloaded and logged; the late call keeps its place until it settles", async () => {
    const held = heldAuthenticate();
    const log = capturedLogger();
    const { authority } = await mountedApp(cleanups, {
      authenticate: held.authenticate,
      authenticateLimits: { maxPending: 1, timeoutMs: 100 },
      logger: log.logger,
    });
    cleanups.push(() => held.release());
    const refused = await usage(authority, "alice");
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({ error: "overloaded" });
    expect(
      log.lines.filter((line) => line.msg === "authenticate did not settle in time; request refused"),
    ).toEqual([expect.objectContaining({ path: "/v1/usage", timeoutMs: 100 })]);
    // the stuck call still holds the only place
    expect((await usage(authority, "bob")).status).toBe(503);
    expect(held.calls()).toBe(1);
    held.release();
    const later = usage(authority, "bob");
    await until(() => held.waiting() === 1, 10_000, "the next call");
    held.release();
    expect((await later).status).toBe(200);
  });

  it("an authenticate that fails on every request is logged within the refusal log's budget", async () => {
    const log = capturedLogger();
    let now = 0;
    const refusals = new RefusalLog(log.logger, 3, 1_000, () => now);
    const failing = new AppAuthentication(() => {
      throw new Error("session store unreachable");
    }, refusals);
    const request = { url: "/v1/usage", headers: {}, socket: {} } as IncomingMessage;
    for (let i = 0; i < 10; i++) expect(await failing.settle(request)).toBeNull();
    expect(failing.resolve(request)).toBeUndefined();
    now = 1_000;
    await failing.settle(request);
    expect(log.lines.map((line) => [line.msg, line.suppressedBefore])).toEqual([
      ["authenticate threw; request refused", undefined],
      ["authenticate threw; request refused", undefined],
      ["authenticate threw; request refused", undefined],
      ["authenticate threw; request refused", 7],
    ]);
    expect(log.lines[0]).toMatchObject({
      level: 50,
      path: "/v1/usage",
      err: { message: "session store unreachable" },
    });
  });
});
