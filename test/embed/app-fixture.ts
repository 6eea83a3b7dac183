import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import WebSocket from "ws";
import { SUBPROTOCOL } from "../../protocol/index.js";
import { createSessionmux, type Sessionmux, type SessionmuxOptions } from "../../src/index.js";
import type { Cleanup } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { ShoutAgent } from "./shout-agent.js";

/** An app that mounts sessionmux on its own http.Server with its own auth, for the embedding tests. */

/**
 * The app's own auth: `Bearer user:<name>`; the name `root` is an admin. Async, as a session
 * lookup would be; `user:broken` makes it throw.
 */
export async function appAuthenticate(req: IncomingMessage) {
  await new Promise((resolve) => setImmediate(resolve));
  const match = /^Bearer user:([a-z]+)$/.exec(req.headers.authorization ?? "");
  if (match?.[1] === "broken") throw new Error("session store unreachable");
  return match?.[1] ? { name: match[1], admin: match[1] === "root" } : undefined;
}

/** The app: one route of its own, 404 for anything else, and its own WebSocket path. */
export function appServer(): Server {
  const server = createServer((req, res) => {
    if (req.url === "/hello") return void res.end("hello from the app");
    res.writeHead(404).end("app 404");
  });
  server.on("upgrade", (req, socket) => {
    if (req.url === "/app-socket") socket.end("HTTP/1.1 418 I'm a teapot\r\nConnection: close\r\n\r\n");
  });
  return server;
}

export async function listen(server: Server): Promise<string> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * The HTTP status an upgrade to `url` was answered with: 101 once the host's first frame arrives,
 * the refusal's status when it closed the socket before that with 4000 + the status (§2).
 */
export function upgradeStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, [SUBPROTOCOL], { headers });
    ws.on("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    // taken: greeted with a hello, or closed at once with 4000 + the status it was refused with (§2)
    ws.on("message", () => {
      resolve(101);
      ws.close();
    });
    ws.on("close", (code) => resolve(code > 4000 ? code - 4000 : 0));
    ws.on("error", reject);
  });
}

export async function mountedApp(
  cleanups: Cleanup[],
  options: Partial<SessionmuxOptions> = {},
): Promise<{ mux: Sessionmux; authority: string }> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  const mux = await createSessionmux({
    db: dir.file("sessions.db"),
    basePath: "/chat",
    agent: new ShoutAgent(),
    authenticate: appAuthenticate,
    ...options,
  });
  return { mux, authority: await attachedApp(cleanups, mux) };
}

/**
 * `mux` closed after the test and attached to an app's `server` (by default this fixture's), which
 * listens on 127.0.0.1 and is closed after the test too; its authority (`127.0.0.1:port`).
 */
export async function attachedApp(
  cleanups: Cleanup[],
  mux: Sessionmux,
  server = appServer(),
): Promise<string> {
  cleanups.push(() => mux.close());
  mux.attach(server);
  const authority = await listen(server);
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return authority;
}
