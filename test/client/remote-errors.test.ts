import { firstValueFrom, lastValueFrom, toArray } from "rxjs";
import { describe, expect, it, vi } from "vitest";
import { controlMirror } from "../../src/client/control-mirror.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient } from "../../src/client/node.js";
import {
  ConnectionRefusedError,
  RemoteError,
  RemoteStreamCarrierError,
  shouldRetry,
} from "../../src/client/remote-errors.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { useTestHost } from "../support/use-test-host.js";
import { peerFixture } from "./peer-fixture.js";

const testHost = useTestHost();

describe("errors from a real host", () => {
  it("a business refusal is a terminal RemoteError with code and category", async () => {
    const { client } = testHost;
    await client.create({ sessionId: "dup" });
    const error = await client.create({ sessionId: "dup" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({
      name: "RemoteError",
      code: "session_exists",
      category: "business",
      terminal: true,
      retryable: false,
    });
    expect(shouldRetry(error)).toBe(false);
  });

  it("bad params are a protocol RemoteError naming the field", async () => {
    const { client } = testHost;
    const error = await client.page({ sessionId: "../.." }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "bad_request", category: "protocol", terminal: true });
    expect((error as RemoteError).data).toMatchObject({ field: expect.stringContaining("sessionId") });
  });

  it("followSession ends with the terminal error of an unknown session instead of retrying", async () => {
    const { client } = testHost;
    const error = await lastValueFrom(followSession(client, "missing").pipe(toArray())).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({ code: "session_not_found", category: "business" });
  });

  it("followSession reports a cursor ahead of the head as terminal", async () => {
    const { client } = testHost;
    const { header } = await client.create({ sessionId: "ahead" });
    const error = await lastValueFrom(
      followSession(client, "ahead", { afterSeq: 50, epoch: header.epoch }).pipe(toArray()),
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "cursor_ahead" });
  });

  it("follow and control complete quietly when their client is closed", async () => {
    const { host } = testHost;
    const own = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
    await own.create({ sessionId: "quiet" });
    const follow = followSession(own, "quiet");
    const followed = lastValueFrom(follow.pipe(toArray()));
    const mirror = controlMirror(own);
    const mirrored = lastValueFrom(mirror.pipe(toArray()));
    await firstValueFrom(mirror);
    await own.close();
    await expect(followed).resolves.toBeInstanceOf(Array);
    await expect(mirrored).resolves.toBeInstanceOf(Array);
  });
});

const { peer, track } = peerFixture();

describe("errors the client raises itself say what happened and what to check", () => {
  it("each refused upgrade is a ConnectionRefusedError whose code and message name the status and what to check", async () => {
    const expected = (url: string) =>
      new Map([
        [
          401,
          ["unauthorized", `the host refused the token (HTTP 401) at ${url}; supply a valid one (setToken)`],
        ],
        [403, ["forbidden_origin", `the host refused this origin or token (HTTP 403) at ${url}; check both`]],
        [
          404,
          [
            "not_found",
            // the path alone said nothing to a caller whose URL already ended in it, under a base path
            `nothing serves the mux at ${url} (HTTP 404); check the URL: the mux is /api/remote.mux below the host's base path (/chat/api/remote.mux for a host mounted at /chat)`,
          ],
        ],
        [
          400,
          [
            "bad_request",
            `the host refused the connection (HTTP 400) at ${url}; check the URL and client version`,
          ],
        ],
      ]);
    for (const status of [401, 403, 404, 400]) {
      const p = await peer({ refuse: () => status });
      const [code, message] = expected(p.url).get(status)!;
      const c = track(createNodeClient({ url: p.url, token: "t" }));
      const error = await c.list().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConnectionRefusedError);
      expect(error).toBeInstanceOf(RemoteError);
      expect(error).toMatchObject({ name: "ConnectionRefusedError", code, message, status, terminal: true });
      expect((error as ConnectionRefusedError).data).toEqual({ status });
      expect(shouldRetry(error)).toBe(false);
    }
  });

  it("a call in flight on a socket that dies fails with a retryable carrier error that says the connection was lost", async () => {
    const p = await peer();
    const c = track(createNodeClient({ url: p.url, token: "t", backoff: { baseMs: 5, capMs: 20 } }));
    // session.create is never resent: a lost socket surfaces to the caller.
    const pending = c.create({ sessionId: "s" }).catch((e: unknown) => e);
    await vi.waitFor(() => expect(p.connections[0]?.received.some((f) => f.type === "call")).toBe(true));
    p.killAll();
    const error = await pending;
    expect(error).toBeInstanceOf(RemoteStreamCarrierError);
    expect(error).toMatchObject({
      name: "RemoteStreamCarrierError",
      message: "connection to the host was lost; retry",
      reason: "socket_lost",
      retryable: true,
    });
    expect(shouldRetry(error)).toBe(true);
  });

  it("a host's retryable refusal of a resendable call is the caller's to retry: the client sends it once", async () => {
    const p = await peer({
      onCall: (conn, f) => {
        conn.send({
          type: "error",
          id: f.id,
          error: { code: "overloaded", message: "busy", category: "internal", retryable: true },
        });
        return undefined;
      },
    });
    const c = track(createNodeClient({ url: p.url, token: "t" }));
    const error = await c.list({}, { timeoutMs: 2_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteError);
    expect(error).toMatchObject({ code: "overloaded", retryable: true });
    expect(p.received("call")).toHaveLength(1);
  });

  it("a call on a closed client fails with a carrier error that says so and is not retried", async () => {
    const p = await peer();
    const c = createNodeClient({ url: p.url, token: "t" });
    await c.close();
    const error = await c.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RemoteStreamCarrierError);
    expect(error).toMatchObject({
      name: "RemoteStreamCarrierError",
      message: "client closed",
      reason: "client_closed",
      retryable: false,
    });
    expect(shouldRetry(error)).toBe(false);
  });

  it("shouldRetry follows a host code's retryable mark and never retries an error it does not know", async () => {
    const p = await peer();
    const c = track(createNodeClient({ url: p.url, token: "t" }));
    const timeout = await c.list({}, { timeoutMs: 50 }).catch((e: unknown) => e);
    expect(timeout).toMatchObject({ code: "timeout", retryable: true });
    expect(shouldRetry(timeout)).toBe(true);
    expect(shouldRetry(new TypeError("not from the client"))).toBe(false);
    expect(shouldRetry({ retryable: true })).toBe(false);
    // a forwarded call whose owner lost the session before answering may have run: never blindly again
    const wire = (code: string) => ({ code, message: "m", category: "internal" as const, retryable: true });
    expect(shouldRetry(RemoteError.fromWireError(wire("outcome_unknown")))).toBe(false);
    expect(shouldRetry(RemoteError.fromWireError(wire("overloaded")))).toBe(true);
  });
});
