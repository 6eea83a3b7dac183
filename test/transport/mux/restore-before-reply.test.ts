import { describe, expect, inject, it, vi } from "vitest";
import type { SessionRow } from "../../../protocol/index.js";
import type { RunningHost } from "../../../src/server.js";
import { peersCleanedBy } from "../../support/cleaned-peer.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { gate } from "../../support/gate.js";
import { ALICE_TOKEN, startTestHost, TEST_TOKENS } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { schemaHosts } from "../../support/schema-hosts.js";
import { until } from "../../support/until.js";

/**
 * A `resume` call that restores a dismissed session has restored it durably before it replies:
 * while the store's restore is held, the call does not answer, even as a later call on the same
 * socket does; once it answers, the caller's very next `session.list`, and the HTTP session index,
 * show the session again (each read once, never polled).
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach(() => vi.restoreAllMocks());
const peer = peersCleanedBy(cleanups);

async function sqliteHost(): Promise<RunningHost> {
  const host = await startTestHost();
  cleanups.push(() => host.dispose());
  return host;
}

async function postgresHost(): Promise<RunningHost> {
  return schemaHosts(pgUrl, "restore_before_reply", TEST_TOKENS, cleanups).start("host-restore");
}

async function newSession(alice: MuxPeer): Promise<string> {
  const { header } = await alice.call<{ header: { sessionId: string } }>("session.create", {});
  return header.sessionId;
}

/** What alice's lists show right now: `session.list` and the HTTP index, each read once. */
async function listedNow(host: RunningHost, alice: MuxPeer): Promise<{ mux: string[]; http: string[] }> {
  const mux = (await alice.call<{ sessions: SessionRow[] }>("session.list", { limit: 200 })).sessions;
  const res = await fetch(`${host.url}/api/chat/sessions?limit=200`, {
    headers: { authorization: `Bearer ${ALICE_TOKEN}` },
  });
  expect(res.status).toBe(200);
  const http = ((await res.json()) as { sessions: { session_id: string }[] }).sessions;
  return { mux: mux.map((r) => r.sessionId), http: http.map((s) => s.session_id) };
}

/**
 * Dismisses `sessionId`, then makes the restoring call with the store's restore held: a list asked
 * on the same socket meanwhile is answered while the call is not, and the lists asked right after
 * the call's reply show the session.
 */
async function expectRestoredBeforeReply(
  host: RunningHost,
  alice: MuxPeer,
  sessionId: string,
  method: string,
  params: Record<string, unknown>,
): Promise<void> {
  await alice.call("session.dismiss", { sessionId });
  expect(await listedNow(host, alice)).toEqual({ mux: [], http: [] });
  const reached = gate();
  const release = gate();
  const restore = host.store.restore.bind(host.store);
  vi.spyOn(host.store, "restore").mockImplementation(async (...args) => {
    reached.open();
    await release.promise;
    return restore(...args);
  });
  const id = alice.nextId();
  alice.send({ type: "call", id, method, params });
  await reached.promise;
  // asked once the restore began: its answer comes after any reply the host sent before it
  await alice.call("session.list", { limit: 1 });
  const repliedWhileHeld = alice.of(id).length > 0;
  release.open();
  const reply = await until(() => alice.of(id)[0], 10_000, `answer to ${method}`);
  expect(repliedWhileHeld).toBe(false);
  expect(reply.type).toBe("result");
  expect(await listedNow(host, alice)).toEqual({ mux: [sessionId], http: [sessionId] });
}

async function respondRestoresBeforeReply(host: RunningHost): Promise<void> {
  const alice = await peer(host, ALICE_TOKEN);
  const sessionId = await newSession(alice);
  await alice.call("session.prompt", { sessionId, text: "/approve deploy", clientMessageId: "a1" });
  const pending = await until(
    () => host.host.live.interactions().find((i) => i.sessionId === sessionId),
    15_000,
    "interaction",
  );
  await expectRestoredBeforeReply(host, alice, sessionId, "session.respond", {
    interactionId: pending.interactionId,
    response: { outcome: "approve" },
  });
}

async function selectModelRestoresBeforeReply(host: RunningHost): Promise<void> {
  const alice = await peer(host, ALICE_TOKEN);
  const sessionId = await newSession(alice);
  await expectRestoredBeforeReply(host, alice, sessionId, "session.selectModel", {
    sessionId,
    model: "demo-fast",
  });
}

async function promptRestoresBeforeReply(host: RunningHost): Promise<void> {
  const alice = await peer(host, ALICE_TOKEN);
  const sessionId = await newSession(alice);
  await expectRestoredBeforeReply(host, alice, sessionId, "session.prompt", {
    sessionId,
    text: "hello",
    clientMessageId: "p1",
  });
}

describe("a restoring call replies after its restore is durable (sqlite)", () => {
  it("session.respond", async () => respondRestoresBeforeReply(await sqliteHost()));
  it("session.selectModel", async () => selectModelRestoresBeforeReply(await sqliteHost()));
  it("session.prompt", async () => promptRestoresBeforeReply(await sqliteHost()));
});

describe("a restoring call replies after its restore is durable (postgres)", () => {
  it.skipIf(!pgUrl)("session.respond", async () => respondRestoresBeforeReply(await postgresHost()));
  it.skipIf(!pgUrl)("session.selectModel", async () => selectModelRestoresBeforeReply(await postgresHost()));
  it.skipIf(!pgUrl)("session.prompt", async () => promptRestoresBeforeReply(await postgresHost()));
});
