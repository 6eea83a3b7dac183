import { once } from "node:events";
import { createServer, IncomingMessage, type Server } from "node:http";
import { connect as netConnect, Socket } from "node:net";
import { Duplex } from "node:stream";
import { describe, expect, it } from "vitest";
import { MUX_PATH, SUBPROTOCOL } from "../../../protocol/index.js";
import { Authenticator } from "../../../src/transport/auth.js";
import { isMuxPath, judgeUpgrade, refuseUpgrade } from "../../../src/transport/mux/upgrade-gate.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { listenOnLoopback } from "../../support/loopback-server.js";
import { upgradeRequest } from "../../support/upgrade-request.js";

/**
 * The upgrade gate on its own: which verdict an upgrade request gets (path, token, Origin,
 * subprotocol) and the HTTP answer a refusal writes on the raw socket.
 */

const cleanups = cleanupsAfterEach();
const TOKEN = "alice-upgrade-gate";
const auth = new Authenticator([{ name: "alice", secret: TOKEN, admin: false }]);

/** A request as Node's HTTP server hands it over for an upgrade. */
function request(headers: Record<string, string>, url: string | null = MUX_PATH): IncomingMessage {
  const req = new IncomingMessage(new Socket());
  // `null`: a request that carries no URL at all
  req.url = url ?? (undefined as unknown as string);
  req.headers.host = "127.0.0.1";
  for (const [name, value] of Object.entries(headers)) req.headers[name.toLowerCase()] = value;
  return req;
}

const authorized = { authorization: `Bearer ${TOKEN}`, "sec-websocket-protocol": SUBPROTOCOL };

describe("an upgrade's verdict", () => {
  it("lets an authorized request offering the subprotocol through, with its principal", () => {
    expect(judgeUpgrade(request(authorized), auth)).toEqual({
      ok: true,
      principal: { name: "alice", admin: false },
    });
    // a query string is no part of the path
    expect(judgeUpgrade(request(authorized, `${MUX_PATH}?x=1`), auth).ok).toBe(true);
  });

  it("refuses another path with 404 before looking at the token", () => {
    const notFound = { ok: false, status: 404, code: "not_found", message: "no such route" };
    expect(judgeUpgrade(request(authorized, "/api/other"), auth)).toEqual(notFound);
    expect(judgeUpgrade(request({}, `${MUX_PATH}x`), auth)).toEqual(notFound);
    expect(judgeUpgrade(request(authorized, null), auth)).toEqual(notFound);
  });

  it("refuses a missing token with 401 and a foreign Origin with 403", () => {
    expect(judgeUpgrade(request({ "sec-websocket-protocol": SUBPROTOCOL }), auth)).toEqual({
      ok: false,
      status: 401,
      code: "unauthorized",
      message: "a valid bearer token is required",
    });
    expect(judgeUpgrade(request({ ...authorized, origin: "http://evil.example" }), auth)).toEqual({
      ok: false,
      status: 403,
      code: "forbidden_origin",
      message: "this Origin is not allowed",
    });
  });

  it("refuses a request that does not offer the subprotocol with 400 naming it", () => {
    const badRequest = {
      ok: false,
      status: 400,
      code: "bad_request",
      message: `subprotocol ${SUBPROTOCOL} is required`,
    };
    expect(judgeUpgrade(request({ authorization: `Bearer ${TOKEN}` }), auth)).toEqual(badRequest);
    expect(
      judgeUpgrade(request({ ...authorized, "sec-websocket-protocol": "chat, sessionmux.v2" }), auth),
    ).toEqual(badRequest);
  });

  it("finds the subprotocol among the offered entries, spaces around it or not", () => {
    const offered = (protocols: string) =>
      judgeUpgrade(request({ ...authorized, "sec-websocket-protocol": protocols }), auth).ok;
    expect(offered(`chat, ${SUBPROTOCOL}`)).toBe(true);
    expect(offered(`chat,${SUBPROTOCOL} ,other`)).toBe(true);
  });

  it("reads a subprotocol header of up to 8192 characters, and refuses a longer one unread", () => {
    const padded = (length: number) => `${" ".repeat(length - SUBPROTOCOL.length - 1)},${SUBPROTOCOL}`;
    expect(padded(8192)).toHaveLength(8192);
    const verdict = (protocols: string) =>
      judgeUpgrade(request({ ...authorized, "sec-websocket-protocol": protocols }), auth);
    expect(verdict(padded(8192)).ok).toBe(true);
    expect(verdict(padded(8193))).toMatchObject({ ok: false, status: 400, code: "bad_request" });
  });

  it("knows the mux's path with or without a query, and nothing else", () => {
    expect(isMuxPath(MUX_PATH)).toBe(true);
    expect(isMuxPath(`${MUX_PATH}?token=no`)).toBe(true);
    expect(isMuxPath(`${MUX_PATH}/`)).toBe(false);
    expect(isMuxPath("/")).toBe(false);
    expect(isMuxPath(undefined)).toBe(false);
  });
});

/** A server on loopback that answers every upgrade with the gate's verdict: refused, or "ok". */
async function gatedServer(): Promise<number> {
  const server: Server = createServer();
  server.on("upgrade", (req: IncomingMessage, socket: Duplex) => {
    socket.on("error", () => {});
    const verdict = judgeUpgrade(req, auth);
    if (!verdict.ok) refuseUpgrade(socket, verdict);
    else socket.end("ok");
  });
  return listenOnLoopback(server, cleanups);
}

/** An upgrade over raw TCP; resolves with everything the server sent until it closed the socket. */
async function rawUpgrade(port: number, headers: readonly string[], path?: string): Promise<string> {
  const socket = netConnect(port, "127.0.0.1");
  socket.on("error", () => {});
  cleanups.push(() => void socket.destroy());
  let received = "";
  socket.on("data", (chunk: Buffer) => {
    received += chunk.toString("latin1");
  });
  socket.write(upgradeRequest(headers, path));
  await once(socket, "close");
  return received;
}

/** The head lines and the body of an answer. */
function answerOf(answer: string): { head: string[]; body: string } {
  const [head = "", body = ""] = answer.split("\r\n\r\n");
  return { head: head.split("\r\n"), body };
}

describe("a refused upgrade's answer on the raw socket", () => {
  it("is 401 with a Bearer challenge, its JSON body and its length", async () => {
    const port = await gatedServer();
    const { head, body } = answerOf(await rawUpgrade(port, [`Sec-WebSocket-Protocol: ${SUBPROTOCOL}`]));
    expect(JSON.parse(body)).toEqual({ error: "unauthorized", message: "a valid bearer token is required" });
    expect(head).toEqual([
      "HTTP/1.1 401 Unauthorized",
      "Connection: close",
      "Content-Type: application/json",
      `Content-Length: ${Buffer.byteLength(body)}`,
      'WWW-Authenticate: Bearer realm="sessionmux"',
    ]);
  });

  it.each([
    [[`Authorization: Bearer ${TOKEN}`], MUX_PATH, "400 Bad Request", "bad_request"],
    [
      [
        `Authorization: Bearer ${TOKEN}`,
        `Sec-WebSocket-Protocol: ${SUBPROTOCOL}`,
        "Origin: http://evil.example",
      ],
      MUX_PATH,
      "403 Forbidden",
      "forbidden_origin",
    ],
    [[`Authorization: Bearer ${TOKEN}`], "/api/elsewhere", "404 Not Found", "not_found"],
  ])("%#: is %s with no challenge", async (headers, path, status, code) => {
    const port = await gatedServer();
    const { head, body } = answerOf(await rawUpgrade(port, headers, path));
    expect(head).toEqual([
      `HTTP/1.1 ${status}`,
      "Connection: close",
      "Content-Type: application/json",
      `Content-Length: ${Buffer.byteLength(body)}`,
    ]);
    expect(JSON.parse(body)).toMatchObject({ error: code });
  });

  it.each([
    [429, "Too Many Requests"],
    [503, "Service Unavailable"],
  ] as const)("names %i %s in its status line", async (status, reason) => {
    const server = createServer();
    server.on("upgrade", (_req: IncomingMessage, socket: Duplex) => {
      socket.on("error", () => {});
      refuseUpgrade(socket, { ok: false, status, code: "refused", message: "not now" });
    });
    const port = await listenOnLoopback(server, cleanups);
    const { head, body } = answerOf(await rawUpgrade(port, [`Authorization: Bearer ${TOKEN}`]));
    expect(head[0]).toBe(`HTTP/1.1 ${status} ${reason}`);
    expect(JSON.parse(body)).toEqual({ error: "refused", message: "not now" });
  });

  it("is not written on a socket that can no longer be written, which is destroyed at once with no error", async () => {
    const written: Buffer[] = [];
    const socket = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, done) {
        written.push(chunk);
        done();
      },
    });
    const errors: unknown[] = [];
    socket.on("error", (err) => errors.push(err));
    socket.end();
    expect(socket.writable).toBe(false);
    refuseUpgrade(socket, { ok: false, status: 503, code: "overloaded", message: "busy" });
    expect(socket.destroyed).toBe(true);
    // a write after the end would report an error on the socket once its close comes
    await once(socket, "close");
    expect(written).toEqual([]);
    expect(errors).toEqual([]);
  });
});
