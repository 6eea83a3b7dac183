import { afterEach, describe, expect, it } from "vitest";
import type { NewEvent, SessionEvent } from "../../../protocol/index.js";
import { ADMIN } from "../../../src/host/principal.js";
import { turnStart } from "../../store/open-store.js";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { readWholeLog } from "../../support/whole-log.js";
import { api } from "./http-client.js";
import { MIB, toolTurn } from "./tool-turns.js";

interface EventsPage {
  session_id: string;
  epoch: string;
  head_seq: number;
  events: { seq: number; at_ms: number; type: string; data: unknown }[];
  has_more: boolean;
  next_after_seq: number;
}

async function wholeLog(host: TestHost, sessionId: string): Promise<SessionEvent[]> {
  const log = await readWholeLog(host.store, sessionId);
  if (log.status !== "ok") throw new Error(log.status);
  return log.events;
}

describe("GET /v1/sessions/{id}/events", () => {
  let host: TestHost | undefined;
  afterEach(async () => {
    await host?.dispose();
    host = undefined;
  });

  it("pages through a session over the transcript bound: every event once, in order, each page bounded", async () => {
    host = await startTestHost({ http: { maxTranscriptBytes: 2 * MIB } });
    await host.store.create({ sessionId: "big", owner: "admin", model: "demo-fast" });
    for (let i = 0; i < 8; i++)
      expect((await host.store.append("big", toolTurn(`t${i}`, 700))).status).toBe("appended");
    // the folded view refuses it; the log itself reads
    expect((await api(host, "/v1/sessions/big", { token: ADMIN_TOKEN })).status).toBe(409);

    const seen: EventsPage["events"] = [];
    let after = 0;
    let epoch: string | undefined;
    for (let pages = 0; ; pages++) {
      expect(pages).toBeLessThan(50);
      const query = `after_seq=${after}${epoch ? `&epoch=${epoch}` : ""}`;
      const reply = await api(host, `/v1/sessions/big/events?${query}`, { token: ADMIN_TOKEN });
      expect(reply.status).toBe(200);
      // a page holds 1 MiB of event data and the event that passed it, as JSON
      expect(reply.body.byteLength).toBeLessThan(2 * MIB);
      const page = reply.json as EventsPage;
      epoch ??= page.epoch;
      expect(page.epoch).toBe(epoch);
      seen.push(...page.events);
      after = page.next_after_seq;
      if (!page.has_more) break;
    }
    const log = await wholeLog(host, "big");
    expect(seen.map((e) => e.seq)).toEqual(log.map((e) => e.seq));
    expect(seen.map((e) => [e.seq, e.at_ms, e.type, e.data])).toEqual(
      log.map((e) => [e.seq, e.at, e.type, e.data]),
    );
    expect(seen.length).toBe(33);
  });

  it("answers limit, the head, and the cursor's errors; another principal's session reads as missing", async () => {
    host = await startTestHost({});
    await host.host.call(ADMIN, "session.create", { sessionId: "s" });
    await host.store.append("s", toolTurn("t", 1));
    const first = (await api(host, "/v1/sessions/s/events?limit=2", { token: ADMIN_TOKEN }))
      .json as EventsPage;
    expect(first.events.map((e) => e.seq)).toEqual([1, 2]);
    expect(first).toMatchObject({ session_id: "s", head_seq: 5, has_more: true, next_after_seq: 2 });
    const rest = (await api(host, "/v1/sessions/s/events?after_seq=2", { token: ADMIN_TOKEN }))
      .json as EventsPage;
    expect(rest.events.map((e) => e.seq)).toEqual([3, 4, 5]);
    expect(rest.has_more).toBe(false);
    const atHead = (await api(host, "/v1/sessions/s/events?after_seq=5", { token: ADMIN_TOKEN }))
      .json as EventsPage;
    expect(atHead).toMatchObject({ events: [], has_more: false, next_after_seq: 5 });

    const ahead = await api(host, "/v1/sessions/s/events?after_seq=6", { token: ADMIN_TOKEN });
    expect(ahead.status).toBe(409);
    // the body says where the head is, so a client can read on from there
    expect(ahead.json).toEqual({ error: "cursor_ahead", head_seq: 5, epoch: first.epoch });
    for (const query of ["limit=0", "limit=501", "after_seq=-1", "after_seq=x"]) {
      const bad = await api(host, `/v1/sessions/s/events?${query}`, { token: ADMIN_TOKEN });
      expect(bad.status, query).toBe(400);
    }
    const foreign = await api(host, "/v1/sessions/s/events", { token: ALICE_TOKEN });
    expect(foreign.status).toBe(404);
    expect(foreign.json).toMatchObject({ error: "session_not_found" });

    // a clear between two pages: the next page, asked at the old epoch, says so
    await host.host.call(ADMIN, "session.clear", { sessionId: "s" });
    const stale = await api(host, `/v1/sessions/s/events?after_seq=2&epoch=${first.epoch}`, {
      token: ADMIN_TOKEN,
    });
    expect(stale.status).toBe(409);
    // and names the new epoch to read from its start
    const cleared = (await api(host, "/v1/sessions/s/events", { token: ADMIN_TOKEN })).json as EventsPage;
    expect(cleared.epoch).not.toBe(first.epoch);
    expect(stale.json).toEqual({ error: "epoch_mismatch", epoch: cleared.epoch });
  });

  it("reads a cold session without starting its agent, sends binary data as base64, and a deleted one is 410", async () => {
    host = await startTestHost({});
    await host.store.create({ sessionId: "cold", owner: "admin", model: "demo-fast" });
    const bytes = Uint8Array.from([0, 1, 2, 250, 255]);
    await host.store.append("cold", [
      turnStart("t"),
      { type: "tool/result", data: { turnId: "t", toolCallId: "c", ok: true, result: bytes, durationMs: 1 } },
    ] as NewEvent[]);
    const page = (await api(host, "/v1/sessions/cold/events", { token: ADMIN_TOKEN })).json as EventsPage;
    expect(page.events.at(-1)!.data).toMatchObject({ result: Buffer.from(bytes).toString("base64") });
    expect(host.host.live.agents()).toEqual([]);
    await host.host.call(ADMIN, "session.delete", { sessionId: "cold" });
    const deleted = await api(host, "/v1/sessions/cold/events", { token: ADMIN_TOKEN });
    expect(deleted.status).toBe(410);
    expect(deleted.json).toMatchObject({ error: "session_retired" });
  });
});
