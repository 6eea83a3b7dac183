import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, inject, it, vi } from "vitest";
import { type RunningHost, startHost } from "../../../src/server.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { MuxPeer } from "../../support/mux-peer.js";

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const ALICE = "alice-secret";
const tokens = [{ name: "alice", secret: ALICE, admin: false }];

async function listed(host: RunningHost, query = ""): Promise<string[]> {
  const res = await fetch(`${host.url}/api/chat/sessions${query}`, {
    headers: { authorization: `Bearer ${ALICE}` },
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { sessions: { session_id: string }[] };
  return body.sessions.map((row) => row.session_id);
}

/**
 * §4: a dismissal takes the session off the caller's list, and §8's list route leaves out what the
 * caller dismissed. Hosts sharing one database each keep encoded list answers: one made on host A
 * must not outlive a dismissal or a restore made through host B.
 */
describe.skipIf(!pgUrl)("GET /api/chat/sessions with several hosts on one PostgreSQL database", () => {
  it("follows a dismissal and a restore made through another host", async () => {
    const schema = `list_hosts_${randomBytes(4).toString("hex")}`;
    cleanups.push(async () => {
      const client = new pg.Client({ connectionString: pgUrl });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    });
    const start = (hostId: string) =>
      startHost({ port: 0, dbPath: pgUrl, dbSchema: schema, dbPoolSize: 2, hostId, tokens });
    const a = await start("host-a");
    cleanups.push(() => a.close());
    const b = await start("host-b");
    cleanups.push(() => b.close());
    const peer = await MuxPeer.connect(b.wsUrl, { token: ALICE });
    cleanups.push(() => peer.ws.terminate());

    const { header } = await peer.call<{ header: { sessionId: string } }>("session.create", { title: "x" });
    await vi.waitFor(async () => expect(await listed(a)).toEqual([header.sessionId]), { timeout: 10_000 });
    expect(await listed(a, "?dismissed=true")).toEqual([]); // both answers now kept by host A

    await peer.call("session.dismiss", { sessionId: header.sessionId });
    await vi.waitFor(async () => expect(await listed(a)).toEqual([]), { timeout: 10_000 });
    expect(await listed(a, "?dismissed=true")).toEqual([header.sessionId]);

    await peer.call("session.restore", { sessionId: header.sessionId });
    await vi.waitFor(async () => expect(await listed(a)).toEqual([header.sessionId]), { timeout: 10_000 });
    expect(await listed(a, "?dismissed=true")).toEqual([]);
  }, 60_000);
});
