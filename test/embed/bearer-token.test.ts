import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createClient } from "../../src/client/client.js";
import { createNodeClient } from "../../src/client/node.js";
import { bearerToken, createSessionmux, type Sessionmux } from "../../src/index.js";
import { encodeBearerSubprotocol } from "../../src/transport/auth.js";
import { readmeExample } from "../support/readme-example.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * An app's own token auth through `bearerToken`: the README's example, mounted on a real server,
 * serves both of the SDK's clients, the Node one (the header) and a browser's (the subprotocol).
 */

const dir = tempDir();
let mux: Sessionmux;
let server: Server;
let base: string;

beforeAll(async () => {
  const code = await readmeExample("### Your own tokens", [
    ['import { bearerToken, createSessionmux, type Principal } from "sessionmux";', ""],
    ["export const mux =", "const mux ="],
    ['"./data/sessions.db"', "db"],
  ]);
  const AsyncFunction = (async () => {}).constructor as new (
    ...args: string[]
  ) => (...values: unknown[]) => Promise<Sessionmux>;
  const env = { ALICE_TOKEN: "alice-token", OPS_TOKEN: "ops-token" };
  mux = await new AsyncFunction("bearerToken", "createSessionmux", "process", "db", `${code}\nreturn mux;`)(
    bearerToken,
    createSessionmux,
    { env },
    dir.file("sessions.db"),
  );
  server = createServer((_req, res) => res.end("app route"));
  mux.attach(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  base = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await mux?.close();
  server?.closeAllConnections();
  await new Promise<void>((resolve) => server?.close(() => resolve()) ?? resolve());
  dir.remove();
});

describe("the README's own-token authentication", () => {
  it("admits the Node client (Authorization header) and a browser's (bearer. subprotocol) under the base path", async () => {
    const url = `ws://${base}/chat/api/remote.mux`;
    const node = createNodeClient({ url, token: "alice-token" });
    const { header } = await node.create({ title: "from node" });
    expect(header.owner).toBe("alice");
    await node.close();
    // a header-only `authenticate` refused this one, which then retried as if the host were down
    const browser = createClient({ url, token: "alice-token", WebSocket, keepAlive: false, network: false });
    const rows = (await browser.list({}, { timeoutMs: 10_000 })).sessions;
    expect(rows.map((row) => row.title)).toEqual(["from node"]);
    await browser.close();
    const ops = createNodeClient({ url, token: "ops-token" });
    expect((await ops.list()).sessions).toHaveLength(1);
    await ops.close();
  });

  it("reads the header on any request and the subprotocol only on a WebSocket upgrade", async () => {
    const headers = (more: Record<string, string>) => ({ headers: more });
    const sessions = `http://${base}/chat/api/chat/sessions`;
    expect((await fetch(sessions, headers({ authorization: "Bearer alice-token" }))).status).toBe(200);
    // the subprotocol is a WebSocket's: a plain request carrying it is refused
    const withProtocol = await fetch(
      sessions,
      headers({ "sec-websocket-protocol": `sessionmux.v1, ${encodeBearerSubprotocol("alice-token")}` }),
    );
    expect(withProtocol.status).toBe(401);
    expect((await fetch(sessions, headers({ authorization: "Bearer wrong" }))).status).toBe(401);
    expect(await (await fetch(`http://${base}/elsewhere`)).text()).toBe("app route");
  });
});
