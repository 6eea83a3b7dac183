import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { connect, createSession, headSeq } from "./mux-fixture.js";

describe("unary calls over the mux (protocol-v1 §4)", () => {
  let host: TestHost;
  let peer: MuxPeer;
  beforeAll(async () => {
    host = await startTestHost();
    peer = await connect(host);
  });
  afterAll(async () => {
    await peer?.disconnect();
    await host?.dispose();
  });

  it("session.models and session.create answer with result frames on the call's id", async () => {
    const id = peer.nextId();
    peer.send({ type: "call", id, method: "session.models" });
    const result = await until(() => peer.of(id)[0]);
    expect(result.type).toBe("result");
    expect(result.value).toHaveProperty("default");
    const { header } = await peer.call<{ header: { sessionId: string } }>("session.create", {
      sessionId: "named-1",
      title: "t",
    });
    expect(header.sessionId).toBe("named-1");
    expect((await peer.callError("session.create", { sessionId: "named-1" })).code).toBe("session_exists");
  });

  it("prompt is idempotent on clientMessageId: a retry returns the first answer and appends nothing", async () => {
    const sessionId = await createSession(peer);
    const first = await peer.call<{ queued: boolean; seq?: number }>("session.prompt", {
      sessionId,
      text: "hi",
      clientMessageId: "same",
    });
    await until(() => !host.host.live.isRunning(sessionId), 20_000, "turn end");
    const head = await headSeq(host, sessionId);
    const retry = await peer.call("session.prompt", { sessionId, text: "hi", clientMessageId: "same" });
    expect(retry).toEqual(first);
    expect(await headSeq(host, sessionId)).toBe(head);
  });

  it("page, list, search and rename route through the host", async () => {
    const sessionId = await createSession(peer, { title: "findable" });
    await peer.call("session.prompt", { sessionId, text: "zebra crossing", clientMessageId: "p1" });
    await until(() => !host.host.live.isRunning(sessionId), 20_000, "turn end");
    const page = await peer.call<{ events: { seq: number }[]; headSeq: number; hasMore: boolean }>(
      "session.page",
      { sessionId, afterSeq: 0, limit: 2 },
    );
    expect(page.events.map((e) => e.seq)).toEqual([1, 2]);
    expect(page.hasMore).toBe(true);
    const list = await peer.call<{ sessions: { sessionId: string }[] }>("session.list", { limit: 200 });
    expect(list.sessions.some((r) => r.sessionId === sessionId)).toBe(true);
    const search = await peer.call<{ hits: { sessionId: string }[] }>("session.search", { query: "zebra" });
    expect(search.hits.some((h) => h.sessionId === sessionId)).toBe(true);
    const renamed = await peer.call<{ seq: number }>("session.rename", { sessionId, title: "renamed" });
    expect(renamed.seq).toBe(await headSeq(host, sessionId));
  });

  it("many calls in flight at once each get their own answer", async () => {
    const ids = Array.from({ length: 100 }, () => peer.nextId());
    for (const id of ids) peer.send({ type: "call", id, method: "session.list", params: { limit: 1 } });
    await until(() => ids.every((id) => peer.of(id).some((f) => f.type === "result")), 20_000, "100 results");
    expect(ids.every((id) => peer.of(id).length === 1)).toBe(true);
  });

  it("missing params count as {}", async () => {
    const id = peer.nextId();
    peer.send({ type: "call", id, method: "session.list" });
    const answer = await until(() => peer.of(id)[0]);
    expect(answer.type).toBe("result");
  });

  it("a refused call answers on its id and later calls on the same id work once it is done", async () => {
    const id = peer.nextId();
    peer.send({ type: "call", id, method: "session.page", params: { sessionId: "missing" } });
    await until(() => peer.of(id)[0]);
    expect(peer.of(id)[0]?.error?.code).toBe("session_not_found");
    peer.send({ type: "call", id, method: "session.models" });
    await until(() => peer.of(id)[1]);
    expect(peer.of(id)[1]?.type).toBe("result");
  });
});
