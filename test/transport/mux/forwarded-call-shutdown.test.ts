import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import type { SessionEvent } from "../../../protocol/index.js";
import { beforeAppend } from "../../host/host-fixture.js";
import { peersCleanedBy } from "../../support/cleaned-peer.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { gate } from "../../support/gate.js";
import { ALICE_TOKEN, TEST_TOKENS } from "../../support/host.js";
import { schemaHosts } from "../../support/schema-hosts.js";
import { readWholeLog } from "../../support/whole-log.js";

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const peer = peersCleanedBy(cleanups);

/**
 * A host shutting down (as `serve` does on SIGTERM) while a WebSocket client's calls wait on the
 * session's owner, another host: each is answered on the socket before it closes, as the host's
 * shutdown settles it. One the owner had begun may still run there: `outcome_unknown`. One it had
 * taken and not begun is taken back and never runs there: `host_shutting_down`, retryable.
 */
describe.skipIf(!pgUrl)("a host shutting down with a client's forwarded calls waiting, on PostgreSQL", () => {
  it("answers each call before the socket closes: outcome_unknown for the one its owner began, host_shutting_down for the one it had not, which never runs there", async () => {
    const hosts = schemaHosts(pgUrl, "forwarded_shutdown", TEST_TOKENS, cleanups);
    const a = await hosts.start("host-a");
    const b = await hosts.start("host-b");
    const onA = await peer(a, ALICE_TOKEN);
    const { header } = await onA.call<{ header: { sessionId: string } }>("session.create", {});
    const sessionId = header.sessionId;
    // A takes the session's lease: B forwards the session's calls to it
    await onA.call("session.selectModel", { sessionId, model: "demo-fast" });
    // A's turn for the first forwarded prompt is held as it opens: the second waits behind it
    const taken = gate();
    const held = gate();
    beforeAppend(
      a.store,
      (events) => events[0]?.type === "turn/start",
      async () => {
        taken.open();
        await held.promise;
      },
    );
    cleanups.push(() => held.open());
    const onB = await peer(b, ALICE_TOKEN);
    const send = (text: string) => {
      const id = onB.nextId();
      onB.send({
        type: "call",
        id,
        method: "session.prompt",
        params: { sessionId, clientMessageId: text, text },
      });
      return id;
    };
    const first = send("first");
    await taken.promise;
    const second = send("second");
    const db = new pg.Client({ connectionString: pgUrl });
    await db.connect();
    cleanups.push(() => db.end());
    const claimedNotBegun = async () =>
      (
        await db.query(
          `SELECT 1 FROM "${hosts.schema}".forwarded_calls WHERE claimed_at IS NOT NULL AND started IS FALSE`,
        )
      ).rows.length;
    await expect.poll(claimedNotBegun, { timeout: 20_000 }).toBe(1);

    await b.close();
    expect((await onB.closed).code).toBe(1001);
    // frames that came before the close; before, the socket closed first and neither answer reached the client
    expect(onB.of(first)).toEqual([
      expect.objectContaining({ type: "error", error: expect.objectContaining({ code: "outcome_unknown" }) }),
    ]);
    expect(onB.of(second)).toEqual([
      expect.objectContaining({
        type: "error",
        error: expect.objectContaining({ code: "host_shutting_down", retryable: true }),
      }),
    ]);
    // taken back as B's inbox closed: A can no longer begin it
    expect(await claimedNotBegun()).toBe(0);
    held.open();

    const texts = async () =>
      ((await readLog(a, sessionId)) as SessionEvent[])
        .filter((e) => e.type === "user/message")
        .map((e) => (e.data as { text: string }).text);
    const ended = async () => (await readLog(a, sessionId)).filter((e) => e.type === "turn/end").length;
    await expect.poll(ended, { timeout: 20_000 }).toBe(1);
    // a prompt sent on A after them runs after anything A still held of them
    await onA.call("session.prompt", { sessionId, clientMessageId: "next", text: "next" });
    await expect.poll(ended, { timeout: 20_000 }).toBe(2);
    // before: the second ran on A once the first's turn opened, after B was gone
    expect(await texts()).toEqual(["first", "next"]);
  }, 60_000);
});

async function readLog(host: { store: Parameters<typeof readWholeLog>[0] }, sessionId: string) {
  const outcome = await readWholeLog(host.store, sessionId);
  if (outcome.status !== "ok") throw new Error(`log of ${sessionId}: ${outcome.status}`);
  return outcome.events;
}
