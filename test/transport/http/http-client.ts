import { request } from "node:http";
import { expect, vi } from "vitest";
import type { Principal } from "../../../src/host/principal.js";
import type { TestHost } from "../../support/host.js";

export const ALICE: Principal = Object.freeze({ name: "alice", admin: false });
export const BOB: Principal = Object.freeze({ name: "bob", admin: false });

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text: string;
  /** Parsed JSON, or undefined when the body is not JSON. */
  json: unknown;
}

export interface Call {
  method?: string;
  token?: string;
  headers?: Record<string, string>;
  /** An object is sent as JSON; a string or Buffer as is. */
  body?: unknown;
}

/** One HTTP request over loopback with node:http (no fetch, so raw targets like `/%2e%2e/x` pass unchanged). */
export function api(host: TestHost, path: string, call: Call = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...call.headers };
  if (call.token !== undefined) headers.authorization = `Bearer ${call.token}`;
  let payload: Buffer | undefined;
  if (call.body !== undefined) {
    payload = Buffer.isBuffer(call.body)
      ? call.body
      : Buffer.from(typeof call.body === "string" ? call.body : JSON.stringify(call.body));
    headers["content-type"] ??= "application/json";
  }
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port: host.port, path, method: call.method ?? "GET", headers },
      (res) => {
        const parts: Buffer[] = [];
        res.on("data", (c: Buffer) => parts.push(c));
        res.on("end", () => {
          const body = Buffer.concat(parts);
          const text = body.toString("utf8");
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, json });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

let counter = 0;
/** A fresh session owned by `principal`, optionally with one completed turn. */
export async function newSession(host: TestHost, principal: Principal, prompt?: string): Promise<string> {
  const sessionId = `s${process.pid}x${++counter}`;
  await host.host.call(principal, "session.create", { sessionId });
  if (prompt !== undefined) {
    await host.host.call(principal, "session.prompt", {
      sessionId,
      text: prompt,
      clientMessageId: `c${++counter}`,
    });
  }
  return sessionId;
}

export async function prompt(
  host: TestHost,
  principal: Principal,
  sessionId: string,
  text: string,
  extra = {},
) {
  return host.host.call(principal, "session.prompt", {
    sessionId,
    text,
    clientMessageId: `c${++counter}`,
    ...extra,
  });
}

/** The newest turn's state as the projection shows it. */
export async function settledState(host: TestHost, sessionId: string): Promise<string> {
  const p = await host.store.projection(sessionId);
  return p?.lastState ?? "missing";
}

/** Waits (by polling the projection) until the newest turn of the session is in `state`. */
export async function waitForState(host: TestHost, sessionId: string, state = "completed"): Promise<void> {
  await vi.waitFor(async () => expect(await settledState(host, sessionId)).toBe(state), {
    timeout: 10_000,
    interval: 20,
  });
}
