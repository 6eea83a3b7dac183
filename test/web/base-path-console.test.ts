import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSessionmux, type Sessionmux } from "../../src/index.js";
import { tempDir } from "../support/temp-dir.js";
import { hasChromium, sendPrompt, useBrowser } from "./browser.js";
import { buildConsole } from "./console-build.js";

const TOKEN = "base-path-token";

describe.skipIf(!hasChromium)("the console under a base path of an app's server", () => {
  const browser = useBrowser();
  const dir = tempDir("sessionmux-base-path-");
  let server: Server;
  let mux: Sessionmux;
  let origin = "";
  let removeBuild: (() => void) | undefined;
  const appRequests: string[] = [];

  beforeAll(async () => {
    const built = await buildConsole();
    removeBuild = built.remove;
    mux = await createSessionmux({
      db: dir.file("sessions.db"),
      basePath: "/chat",
      tokens: [{ name: "admin", secret: TOKEN, admin: true }],
      http: { webRoot: built.webRoot },
    });
    // the app answers every path that is not under /chat, including the console's own names
    server = createServer((req, res) => {
      appRequests.push(req.url ?? "");
      res.writeHead(200, { "content-type": "text/plain" }).end("the app's own page");
    });
    mux.attach(server);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }, 120_000);

  afterAll(async () => {
    await mux?.close();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    removeBuild?.();
    dir.remove();
  });

  it("loads its assets, connects its mux and runs a turn under /chat; the app keeps its routes", async () => {
    const page = await browser.profile.newPage();
    const requested: string[] = [];
    const sockets: string[] = [];
    page.on("request", (request) => requested.push(new URL(request.url()).pathname));
    page.on("websocket", (socket) => sockets.push(socket.url()));
    // opened as a link would be, without the trailing slash
    await page.goto(`${origin}/chat#token=${TOKEN}`);
    await page.waitForSelector('[data-testid="connection"][data-state="open"]');
    expect(new URL(page.url()).pathname).toBe("/chat/");
    expect(page.url()).not.toContain(TOKEN);

    await page.click('[data-testid="new-session"]');
    await page.waitForSelector('[data-testid="session"]:not([hidden])');
    await sendPrompt(page, "hello from a base path");
    await expect
      .poll(
        () =>
          page.$$eval('[data-testid="assistant-text"]', (els) =>
            els.map((e) => e.textContent ?? "").join(""),
          ),
        { timeout: 30_000 },
      )
      .toBe("Echo: hello from a base path");

    expect(sockets).toEqual([`${origin.replace("http:", "ws:")}/chat/api/remote.mux`]);
    // every request of the page went under the base path: none reached the app
    expect(requested.length).toBeGreaterThan(2);
    expect(requested.filter((path) => path !== "/chat" && !path.startsWith("/chat/"))).toEqual([]);
    expect(appRequests).toEqual([]);

    // only the bare base path of a page load is sent to its folder; an API call is never redirected
    const bare = await fetch(`${origin}/chat?x=1`, { redirect: "manual" });
    expect([bare.status, bare.headers.get("location")]).toEqual([308, "/chat/?x=1"]);
    expect((await fetch(`${origin}/chat`, { method: "POST", redirect: "manual" })).status).not.toBe(308);
    expect((await fetch(`${origin}/chatroom`)).status).toBe(200);
    expect(appRequests).toEqual(["/chatroom"]);
    const appPage = await fetch(`${origin}/`);
    expect(await appPage.text()).toBe("the app's own page");
    await page.close();
  });
});
