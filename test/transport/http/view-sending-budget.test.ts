import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { until } from "../../support/until.js";
import { api } from "./http-client.js";
import { toolTurn } from "./tool-turns.js";

let host: TestHost | undefined;
let reader: Socket | undefined;
afterEach(async () => {
  reader?.destroy();
  await host?.dispose();
  host = undefined;
  reader = undefined;
});

async function sessionOf(h: TestHost, sessionId: string, owner: string, mib: number): Promise<void> {
  await h.store.create({ sessionId, owner, model: "demo-fast" });
  for (let i = 0; i < mib; i++)
    expect((await h.store.append(sessionId, toolTurn(`${sessionId}${i}`, 1000))).status).toBe("appended");
}

/** Asks for `path` on a connection of its own and stops reading once the status line came. */
async function unreadAnswer(h: TestHost, path: string, token: string): Promise<Socket> {
  const socket = connect(h.port, "127.0.0.1");
  let head = "";
  socket.on("data", (chunk: Buffer) => {
    head += chunk.toString("latin1", 0, 64);
    socket.pause();
  });
  socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  await until(() => head.length > 0, 20_000, "the answer's first bytes");
  expect(head).toMatch(/^HTTP\/1\.1 200/);
  return socket;
}

describe("the views being sent to one principal are bounded (docs/reliability.md, Limits)", () => {
  it("a view that would pass the bound with those not yet read is overloaded; one alone never is", async () => {
    host = await startTestHost();
    // 24 MiB of event data: a view of it is more than the sockets' buffers take unread
    await sessionOf(host, "a", "alice", 24);
    await sessionOf(host, "b", "alice", 10);
    await sessionOf(host, "c", "bob", 10);
    reader = await unreadAnswer(host, "/v1/sessions/a", ALICE_TOKEN);

    const refused = await api(host, "/v1/sessions/b", { token: ALICE_TOKEN });
    expect(refused.status).toBe(503);
    expect(refused.json).toMatchObject({ error: "overloaded" });
    // another principal's views are counted apart
    expect((await api(host, "/v1/sessions/c", { token: BOB_TOKEN })).status).toBe(200);

    // the connection gone, its view no longer counts
    reader.destroy();
    await expect
      .poll(async () => (await api(host!, "/v1/sessions/b", { token: ALICE_TOKEN })).status)
      .toBe(200);
  });
});
