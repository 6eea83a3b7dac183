import { describe, expect, inject, it } from "vitest";
import type { RunningHost } from "../../../src/server.js";
import { decodePayload } from "../../../src/store/postgres/pg-notice-payload.js";
import { holdNotices } from "../../store/postgres/held-notices.js";
import { peersCleanedBy } from "../../support/cleaned-peer.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { ALICE_TOKEN, TEST_TOKENS } from "../../support/host.js";
import { schemaHosts } from "../../support/schema-hosts.js";

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const peer = peersCleanedBy(cleanups);

async function listed(host: RunningHost): Promise<string[]> {
  const res = await fetch(`${host.url}/api/chat/sessions?limit=200`, {
    headers: { authorization: `Bearer ${ALICE_TOKEN}` },
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { sessions: { session_id: string }[] };
  return body.sessions.map((row) => row.session_id);
}

/**
 * A `resume` call made through host A on a session host B owns is forwarded to B, which restores
 * the caller's dismissal before answering. A's HTTP session index, which keeps encoded answers
 * until a commit notice, must show the session as soon as A hands the answer on, though A's
 * LISTEN connection has not heard the restore yet (held here until the end).
 */
describe.skipIf(!pgUrl)("GET /api/chat/sessions after a restoring call forwarded to another host", () => {
  it("shows the restored session on the forwarding host before its feed hears the restore", async () => {
    const hosts = schemaHosts(pgUrl, "forwarded_restore_list", TEST_TOKENS, cleanups);
    const a = await hosts.start("host-a");
    const b = await hosts.start("host-b");
    const onA = await peer(a, ALICE_TOKEN);
    const onB = await peer(b, ALICE_TOKEN);
    const { header } = await onB.call<{ header: { sessionId: string } }>("session.create", {});
    const sessionId = header.sessionId;
    // a resume call through B: B takes the session's lease, so A forwards the next one to it
    await onB.call("session.selectModel", { sessionId, model: "demo-fast" });
    await onA.call("session.dismiss", { sessionId });
    expect(await listed(a)).toEqual([]);

    const notices = holdNotices(a.store);
    cleanups.push(() => notices.release());
    expect(await listed(a)).toEqual([]); // the answer A now keeps
    await onA.call("session.selectModel", { sessionId, model: "demo-careful" });
    expect(await listed(a)).toEqual([sessionId]);

    // the restore was B's commit, and its NOTIFY reached A only through the held feed
    await expect
      .poll(
        () =>
          notices.held.some((text) => {
            const { host, changes } = decodePayload(text);
            return (
              host === "host-b" &&
              changes !== "all" &&
              changes.some((c) => c.sessionId === sessionId && c.dismissal && c.dismissed === false)
            );
          }),
        { timeout: 10_000 },
      )
      .toBe(true);
    notices.release();
    expect(await listed(a)).toEqual([sessionId]);
  }, 60_000);
});
