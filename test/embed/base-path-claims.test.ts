import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { createSessionmux, type Sessionmux } from "../../src/index.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { attachedApp, listen, upgradeStatus } from "./app-fixture.js";

/**
 * Which requests of an app's server `createSessionmux` takes, by its `basePath`: under a base path
 * every path below it (and that path itself), at the root only the host's own routes; anything
 * else reaches the app, which here names what it got. Upgrades: only the mux's path (the app has
 * no upgrade listener, so one not taken is refused 404).
 */

const cleanups = cleanupsAfterEach();
const tokens = [{ name: "admin", secret: "s3cret", admin: true }];
const auth = { authorization: "Bearer s3cret" };

/** An app answering `app <url>` to every request, with no upgrade listener: one not taken is a 404. */
function appServer(): Server {
  return createServer((req, res) => res.end(`app ${req.url}`));
}

async function mounted(basePath: string | undefined): Promise<{ mux: Sessionmux; authority: string }> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  const mux = await createSessionmux({
    db: dir.file("sessions.db"),
    tokens,
    ...(basePath !== undefined ? { basePath } : {}),
  });
  return { mux, authority: await attachedApp(cleanups, mux, appServer()) };
}

/** Who answered: the app (its text) or sessionmux (its status and JSON). */
async function answer(authority: string, path: string, method = "GET"): Promise<unknown> {
  const r = await fetch(`http://${authority}${path}`, { method, redirect: "manual" });
  const text = await r.text();
  return text.startsWith("app ") ? text : [r.status, JSON.parse(text)];
}

describe("createSessionmux under a base path", () => {
  it("takes the paths below it and the base path itself, and leaves the app every other, however alike", async () => {
    const { authority } = await mounted("/chat");
    expect(await answer(authority, "/chat/healthz")).toEqual([200, { ok: true }]);
    expect(await answer(authority, "/chat/readyz?probe=1")).toMatchObject([200, { ready: true }]);
    // the base path itself, with a query, by a method it does not redirect: sessionmux's own 404
    expect(await answer(authority, "/chat?x=1", "POST")).toEqual([404, { error: "not_found" }]);
    // a longer name that starts with it, and a path of its length that does not
    expect(await answer(authority, "/chatroom")).toBe("app /chatroom");
    expect(await answer(authority, "/chat-x/healthz")).toBe("app /chat-x/healthz");
    expect(await answer(authority, "/abcd/healthz")).toBe("app /abcd/healthz");
    expect(await answer(authority, "/healthz")).toBe("app /healthz");
  });

  it("takes the upgrade of its mux path only, query aside", async () => {
    const { mux, authority } = await mounted("/chat");
    expect(mux.muxPath).toBe("/chat/api/remote.mux");
    expect(await upgradeStatus(`ws://${authority}/chat/api/remote.mux?v=1`, auth)).toBe(101);
    expect(await upgradeStatus(`ws://${authority}/chat/other`, auth)).toBe(404);
    expect(await upgradeStatus(`ws://${authority}/api/remote.mux`, auth)).toBe(404);
    expect(await upgradeStatus(`ws://${authority}/chatapi/remote.mux`, auth)).toBe(404);
  });

  it("is taken without its trailing slashes, and refused when it is not a path", async () => {
    for (const basePath of ["/chat/", "/chat//"]) {
      const { mux, authority } = await mounted(basePath);
      expect([mux.basePath, mux.muxPath]).toEqual(["/chat", "/chat/api/remote.mux"]);
      expect(await answer(authority, "/chat/healthz")).toEqual([200, { ok: true }]);
    }
    for (const basePath of ["chat", "chat/", "/chat?x=1", "/chat#top", "/my chat"]) {
      await expect(mounted(basePath)).rejects.toMatchObject({
        name: "StartupError",
        code: "option_invalid",
        message: `basePath must be a path starting with "/", got ${JSON.stringify(basePath)}`,
      });
    }
  });
});

describe("an app's own upgrade path under the base path", () => {
  it("is left to the app's upgrade listener alone", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const mux = await createSessionmux({ db: dir.file("sessions.db"), tokens, basePath: "/chat" });
    cleanups.push(() => mux.close());
    const echo = new WebSocketServer({ noServer: true });
    echo.on("connection", (ws) => ws.on("message", (data) => ws.send(data)));
    cleanups.push(() => new Promise<void>((resolve) => echo.close(() => resolve())));
    const server = appServer();
    server.on("upgrade", (req, socket, head) => {
      if (req.url === "/chat/app-socket")
        echo.handleUpgrade(req, socket, head, (ws) => echo.emit("connection", ws));
    });
    mux.attach(server);
    const authority = await listen(server);
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const client = new WebSocket(`ws://${authority}/chat/app-socket`);
    cleanups.push(() => client.terminate());
    await once(client, "open");
    for (const word of ["ping", "pong"]) {
      client.send(word);
      const [reply] = (await once(client, "message")) as [Buffer];
      expect(reply.toString()).toBe(word);
    }
  });
});

describe("createSessionmux at the root", () => {
  it("takes the host's routes only, query aside, and leaves the app the rest", async () => {
    for (const basePath of [undefined, "", "/"]) {
      const { mux, authority } = await mounted(basePath);
      expect([mux.basePath, mux.muxPath]).toEqual(["", "/api/remote.mux"]);
      expect(await answer(authority, "/healthz")).toEqual([200, { ok: true }]);
      expect(await answer(authority, "/readyz?probe=1")).toMatchObject([200, { ready: true }]);
      expect(await answer(authority, "/")).toBe("app /");
      expect(await answer(authority, "/users?page=2")).toBe("app /users?page=2");
      expect(await upgradeStatus(`ws://${authority}/api/remote.mux`, auth)).toBe(101);
      expect(await upgradeStatus(`ws://${authority}/app-socket`, auth)).toBe(404);
    }
  });
});
