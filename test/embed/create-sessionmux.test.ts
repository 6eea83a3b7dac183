import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { firstValueFrom } from "rxjs";
import { filter, scan } from "rxjs/operators";
import { describe, expect, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient } from "../../src/client/node.js";
import { createSessionmux } from "../../src/index.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { listen, mountedApp, upgradeStatus } from "./app-fixture.js";

const cleanups = cleanupsAfterEach();
const mounted = (options: Parameters<typeof mountedApp>[1] = {}) => mountedApp(cleanups, options);

describe("createSessionmux on an app's own http.Server", () => {
  it("drives a whole turn of a custom agent through the SDK, with the app's authenticate", async () => {
    const { authority } = await mounted();
    const client = createNodeClient({ url: `ws://${authority}/chat/api/remote.mux`, token: "user:alice" });
    cleanups.push(() => client.close());
    const { sessionId } = (await client.create({ title: "shouting" })).header;
    await client.prompt({ sessionId, text: "make it loud" });
    const events = await firstValueFrom(
      followSession(client, sessionId).pipe(
        scan(
          (all: SessionEvent[], update) => (update.kind === "events" ? [...all, ...update.events] : all),
          [],
        ),
        filter((all) => all.some((e) => e.type === "turn/end")),
      ),
    );
    expect(events.map((e) => e.type)).toEqual([
      "session/created",
      "turn/start",
      "user/message",
      "tool/call",
      "tool/result",
      "assistant/delta",
      "assistant/delta",
      "assistant/delta",
      "turn/end",
    ]);
    const result = events.find((e) => e.type === "tool/result");
    expect(result?.type === "tool/result" && result.data.result).toBe("MAKE IT LOUD");
    const text = events.flatMap((e) => (e.type === "assistant/delta" ? [e.data.text] : [])).join("");
    expect(text).toBe("MAKE IT LOUD");
    const end = events.at(-1);
    expect(end?.type === "turn/end" && end.data.state).toBe("completed");

    const metrics = await (
      await fetch(`http://${authority}/chat/metrics`, { headers: { authorization: "Bearer user:root" } })
    ).text();
    expect(metrics).toContain('sessionmux_turn_seconds_count{state="completed"} 1');
    expect(metrics).toContain("sessionmux_turn_first_token_seconds_count 1");
    expect(metrics).toContain('sessionmux_call_seconds_count{method="session.prompt",outcome="ok"} 1');
    expect(metrics).toContain("process_resident_memory_bytes");

    // The session belongs to the principal the app's authenticate returned.
    const bob = createNodeClient({ url: `ws://${authority}/chat/api/remote.mux`, token: "user:bob" });
    cleanups.push(() => bob.close());
    expect((await bob.list()).sessions.map((r) => r.sessionId)).not.toContain(sessionId);
    expect((await client.list()).sessions.map((r) => r.sessionId)).toContain(sessionId);
  });

  it("counts the app's principal by its name across sockets: the socket limit and the creation bucket", async () => {
    const { authority } = await mounted({
      principals: { maxSocketsPerPrincipal: 2, sessionCreateBurst: 2, sessionCreatePerSecond: 0.001 },
    });
    const url = `ws://${authority}/chat/api/remote.mux`;
    // each request is authenticated anew, so each socket has a principal object of its own
    const first = createNodeClient({ url, token: "user:alice" });
    const second = createNodeClient({ url, token: "user:alice" });
    cleanups.push(
      () => first.close(),
      () => second.close(),
    );
    await first.create({});
    await second.create({});
    // told by close code 4429, which a browser can read
    expect(await upgradeStatus(url, { authorization: "Bearer user:alice" })).toBe(429);
    expect(await upgradeStatus(url, { authorization: "Bearer user:bob" })).toBe(101);
    // the two creations emptied alice's bucket, whichever of her sockets asks next
    await expect(first.create({})).rejects.toMatchObject({ code: "rate_limited" });
    await second.close();
    expect(await upgradeStatus(url, { authorization: "Bearer user:alice" })).toBe(101);
  });

  it("leaves the app's routes and upgrades alone and answers its own under the base path", async () => {
    const { authority } = await mounted();
    const hello = await fetch(`http://${authority}/hello`);
    expect(await hello.text()).toBe("hello from the app");
    const missing = await fetch(`http://${authority}/api/chat/sessions`);
    expect([missing.status, await missing.text()]).toEqual([404, "app 404"]);

    expect((await fetch(`http://${authority}/chat/healthz`)).status).toBe(200);
    expect((await fetch(`http://${authority}/chat/api/chat/sessions`)).status).toBe(401);
    const listed = await fetch(`http://${authority}/chat/api/chat/sessions`, {
      headers: { authorization: "Bearer user:alice" },
    });
    expect(listed.status).toBe(200);

    expect(await upgradeStatus(`ws://${authority}/app-socket`)).toBe(418);
    expect(await upgradeStatus(`ws://${authority}/chat/api/remote.mux`)).toBe(401);
    expect(
      await upgradeStatus(`ws://${authority}/chat/api/remote.mux`, { authorization: "Bearer user:nobody1" }),
    ).toBe(401);
    expect(
      await upgradeStatus(`ws://${authority}/chat/api/remote.mux`, { authorization: "Bearer user:broken" }),
    ).toBe(401);
    const broken = await fetch(`http://${authority}/chat/api/chat/sessions`, {
      headers: { authorization: "Bearer user:broken" },
    });
    expect(broken.status).toBe(401);
    expect(
      await upgradeStatus(`ws://${authority}/chat/api/remote.mux`, { authorization: "Bearer user:alice" }),
    ).toBe(101);
  });

  it("answers CORS preflights for the configured origins only", async () => {
    const { authority } = await mounted({ cors: ["https://app.example"] });
    const preflight = (origin: string) =>
      fetch(`http://${authority}/chat/api/chat/sessions`, {
        method: "OPTIONS",
        headers: {
          origin,
          "access-control-request-method": "GET",
          "access-control-request-headers": "authorization",
        },
      });
    const allowed = await preflight("https://app.example");
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(allowed.headers.get("access-control-allow-headers")).toContain("authorization");
    const other = await preflight("https://evil.example");
    expect(other.headers.get("access-control-allow-origin")).toBeNull();

    const get = (origin: string) =>
      fetch(`http://${authority}/chat/api/chat/sessions`, {
        headers: { origin, authorization: "Bearer user:alice" },
      });
    const fromApp = await get("https://app.example");
    expect(fromApp.status).toBe(200);
    expect(fromApp.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect((await get("https://evil.example")).status).toBe(403);
  });

  it("answers CORS for an origin configured in capitals, as its Origin check takes it", async () => {
    // the Origin check took it and answered 200, but the CORS headers compared it case-sensitively
    // and sent none, so the browser, whose Origin is lower case, dropped every answer
    const { authority } = await mounted({ cors: ["HTTPS://App.Example"] });
    const preflight = await fetch(`http://${authority}/chat/api/chat/sessions`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "GET" },
    });
    expect(preflight.headers.get("access-control-allow-origin")).toBe("https://app.example");
    const answer = await fetch(`http://${authority}/chat/api/chat/sessions`, {
      headers: { origin: "https://app.example", authorization: "Bearer user:alice" },
    });
    expect([answer.status, answer.headers.get("access-control-allow-origin")]).toEqual([
      200,
      "https://app.example",
    ]);
  });

  it("works as Connect-style middleware and an upgrade handler without attach", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const mux = await createSessionmux({
      db: dir.file("sessions.db"),
      tokens: [{ name: "admin", secret: "s3cret", admin: true }],
    });
    cleanups.push(() => mux.close());
    const server = createServer((req, res) =>
      mux.handler(req, res, () => res.writeHead(200).end(`app: ${req.url}`)),
    );
    server.on("upgrade", (req, socket, head) => {
      if (!mux.upgrade(req, socket, head)) socket.destroy();
    });
    const authority = await listen(server);
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    });
    expect(await (await fetch(`http://${authority}/`)).text()).toBe("app: /");
    expect(await (await fetch(`http://${authority}/chat`)).text()).toBe("app: /chat");
    expect(await (await fetch(`http://${authority}/api/users`)).text()).toBe("app: /api/users");
    expect(await (await fetch(`http://${authority}/v1/orders/7`)).text()).toBe("app: /v1/orders/7");
    expect((await fetch(`http://${authority}/api/chat/sessions`)).status).toBe(401);
    expect((await fetch(`http://${authority}/v1/sessions/s1`)).status).toBe(401);
    expect((await fetch(`http://${authority}/healthz`)).status).toBe(200);
    expect((await fetch(`http://${authority}/metrics`)).status).toBe(401);
    const client = createNodeClient({ url: `ws://${authority}/api/remote.mux`, token: "s3cret" });
    cleanups.push(() => client.close());
    const { sessionId } = (await client.create({})).header;
    expect((await client.list()).sessions.map((r) => r.sessionId)).toContain(sessionId);
  });

  it("refuses a database whose folder does not exist unless asked to create it", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("missing/sessions.db");
    await expect(
      createSessionmux({ db, tokens: [{ name: "a", secret: "s", admin: true }] }),
    ).rejects.toMatchObject({
      code: "db_folder_missing",
      message: expect.stringContaining(dir.file("missing")),
    });
    const mux = await createSessionmux({
      db,
      createDbFolder: true,
      tokens: [{ name: "a", secret: "s", admin: true }],
    });
    await mux.close();
  });

  it("names a file that is not a database", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("notes.txt");
    writeFileSync(db, "these are my notes, not a database ".repeat(200));
    await expect(
      createSessionmux({ db, tokens: [{ name: "a", secret: "s", admin: true }] }),
    ).rejects.toMatchObject({
      code: "db_unreadable",
      message: expect.stringContaining(db),
    });
    expect(readFileSync(db, "utf8")).toMatch(/^these are my notes/);
  });
});
