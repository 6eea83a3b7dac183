import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { transform } from "esbuild";
import { describe, expect, it } from "vitest";
import { createSessionmux } from "../../src/index.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { listen, upgradeStatus } from "./app-fixture.js";

const cleanups = cleanupsAfterEach();

/** The README's Express mounting example, as a function of the names it uses. */
async function expressExample() {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const written = /```ts\n(app\.use\(mux\.handler\)[\s\S]*?)```/.exec(readme)?.[1];
  if (written === undefined) throw new Error("the README has no example mounting mux.handler");
  const { code } = await transform(written, { loader: "ts" });
  return new Function("app", "express", "server", "mux", code) as (...names: unknown[]) => void;
}

describe("the README's Express mounting", () => {
  it("answers an upgrade to another path 404, so a client with a wrong URL stops rather than retrying", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const mux = await createSessionmux({
      db: dir.file("sessions.db"),
      basePath: "/chat",
      tokens: [{ name: "alice", secret: "alice-secret", admin: false }],
    });
    cleanups.push(() => mux.close());
    const handlers: unknown[] = [];
    const app = { use: (handler: unknown) => handlers.push(handler) };
    const express = { json: () => "express.json()" };
    const server = createServer((req, res) => mux.handler(req, res, () => res.writeHead(404).end()));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    (await expressExample())(app, express, server, mux);
    expect(handlers).toEqual([mux.handler, "express.json()"]);
    const authority = await listen(server);
    const headers = { authorization: "Bearer alice-secret" };
    expect(await upgradeStatus(`ws://${authority}/chat/api/remote.mux`, headers)).toBe(101);
    // a socket destroyed unanswered reads as a host that is down: the client retried for ever
    expect(await upgradeStatus(`ws://${authority}/api/remote.mux`, headers)).toBe(404);
  });
});
