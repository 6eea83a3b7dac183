import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { until } from "../support/until.js";
import { freePort } from "./child-host.js";

/**
 * A call that settles without an answer says whether it ever reached an open socket, so an app can
 * tell "not sent" (safe to discard or edit) from "the host may have it".
 */

let host: TestHost;
let proxy: TcpProxy;
const clients: SessionmuxClient[] = [];
const client = (url: string): SessionmuxClient => {
  const c = createNodeClient({
    url,
    token: ADMIN_TOKEN,
    backoff: { baseMs: 20, capMs: 100 },
    keepAlive: false,
  });
  clients.push(c);
  return c;
};

beforeAll(async () => {
  host = await startTestHost();
  proxy = await startTcpProxy(host.port);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await proxy?.stop();
  await host?.dispose();
});

describe("the timeout or abort of a call says whether it was sent", () => {
  it("a prompt made while no host is reachable times out with sent: false", async () => {
    const offline = client(`ws://127.0.0.1:${await freePort()}/api/remote.mux`);
    const error = await offline
      .prompt({ sessionId: "s", text: "hi" }, { timeoutMs: 150 })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "timeout", data: { method: "session.prompt", sent: false } });
  });

  it("a prompt aborted while no host is reachable says sent: false", async () => {
    const offline = client(`ws://127.0.0.1:${await freePort()}/api/remote.mux`);
    const controller = new AbortController();
    const pending = offline.prompt({ sessionId: "s", text: "hi" }, { signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toMatchObject({ code: "aborted", data: { sent: false } });
  });

  it("a prompt written to an open socket whose path then went dead times out with sent: true", async () => {
    const c = client(`ws://127.0.0.1:${proxy.port}/api/remote.mux`);
    const { header } = await c.create({});
    await until(() => c.state.name === "open", 10_000, "an open socket");
    proxy.silenceAll();
    const error = await c
      .prompt({ sessionId: header.sessionId, text: "hi" }, { timeoutMs: 150 })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "timeout", data: { method: "session.prompt", sent: true } });
  });
});
