import { afterEach, describe, expect, it } from "vitest";
import type { NewEvent } from "../../../protocol/index.js";
import type { HostStore } from "../../../src/store/live-state-store.js";
import { readSessionTranscript } from "../../../src/transport/http/session-transcript.js";
import { userMessage } from "../../store/open-store.js";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { readWholeLog } from "../../support/whole-log.js";
import { withMembers } from "../../support/with-members.js";
import { api } from "./http-client.js";

/**
 * How a view reads a session's log while it changes (`readSessionTranscript` behind
 * `GET /v1/sessions/{id}`): commits landing between the fold and the projection read, and clears.
 */

let h: TestHost | undefined;
afterEach(async () => {
  await h?.dispose();
  h = undefined;
});

/** Runs before each projection read the host makes while set (another writer landing just then). */
let beforeProjection: ((sessionId: string) => Promise<void>) | undefined;

async function hostWithHook(): Promise<TestHost> {
  beforeProjection = undefined;
  h = await startTestHost({
    storeView: (store: HostStore) =>
      withMembers(store, {
        projection: async (sessionId: string) => {
          await beforeProjection?.(sessionId);
          return store.projection(sessionId);
        },
      }),
  });
  return h;
}

const note = (text: string): NewEvent => userMessage(text);

async function view(sessionId: string) {
  const reply = await api(h!, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
  return reply as { status: number; json: { seq: number; epoch: string; messages: { content: string }[] } };
}

async function head(sessionId: string): Promise<{ headSeq: number; epoch: string }> {
  const log = await readWholeLog(h!.store, sessionId);
  if (log.status !== "ok") throw new Error(log.status);
  return { headSeq: log.headSeq, epoch: log.epoch };
}

describe("a view's read of a session that changes while it is read", () => {
  it("catches up with commits that land before its projection read: four rounds, then answers what it folded", async () => {
    const host = await hostWithHook();
    for (const [sessionId, landing] of [
      ["four", 4],
      ["five", 5],
    ] as const) {
      await host.store.create({ sessionId, owner: "alice", model: "demo-fast" });
      expect((await host.store.append(sessionId, [note("first")])).status).toBe("appended");
      const before = (await head(sessionId)).headSeq;
      let left = landing;
      beforeProjection = async (id) => {
        if (id !== sessionId || left <= 0) return;
        left--;
        expect((await host.store.append(id, [note(`landed ${landing - left}`)])).status).toBe("appended");
      };
      const reply = await view(sessionId);
      beforeProjection = undefined;
      expect(reply.status).toBe(200);
      const { headSeq } = await head(sessionId);
      expect(headSeq).toBe(before + landing);
      const texts = reply.json.messages.map((m) => m.content);
      if (landing === 4) {
        // every commit that landed was folded: the view is at the head
        expect(reply.json.seq).toBe(headSeq);
        expect(texts).toEqual(["first", "landed 1", "landed 2", "landed 3", "landed 4"]);
      } else {
        // past the rounds it answers: seq names exactly what its messages show, one short of the head
        expect(reply.json.seq).toBe(headSeq - 1);
        expect(texts).toEqual(["first", "landed 1", "landed 2", "landed 3", "landed 4"]);
      }
    }
  });

  it("starts again after a clear: two clears in a row are read through, a third answers 409 session_busy", async () => {
    const host = await hostWithHook();
    for (const [sessionId, clears] of [
      ["twice", 2],
      ["thrice", 3],
    ] as const) {
      await host.store.create({ sessionId, owner: "alice", model: "demo-fast" });
      expect((await host.store.append(sessionId, [note("before")])).status).toBe("appended");
      // read once, so the view starts from the transcript it kept
      expect((await view(sessionId)).json.messages.map((m) => m.content)).toEqual(["before"]);
      let left = clears;
      beforeProjection = async (id) => {
        if (id !== sessionId || left <= 0) return;
        left--;
        expect((await host.store.clear(id)).status).toBe("cleared");
        const text = `after clear ${clears - left}`;
        expect((await host.store.append(id, [note(text)])).status).toBe("appended");
      };
      const reply = await view(sessionId);
      beforeProjection = undefined;
      if (clears === 2) {
        expect(reply.status).toBe(200);
        expect(reply.json.messages.map((m) => m.content)).toEqual(["after clear 2"]);
        expect(reply.json.epoch).toBe((await head(sessionId)).epoch);
      } else {
        expect(reply.status).toBe(409);
        expect(reply.json).toEqual({ error: "session_busy" });
      }
    }
  });

  it("a clear since the kept transcript counts as one restart: with two more during the read it is 409 session_busy", async () => {
    const host = await hostWithHook();
    for (const [sessionId, during] of [
      ["one-more", 1],
      ["two-more", 2],
    ] as const) {
      await host.store.create({ sessionId, owner: "alice", model: "demo-fast" });
      expect((await host.store.append(sessionId, [note("kept")])).status).toBe("appended");
      expect((await view(sessionId)).status).toBe(200);
      expect((await host.store.clear(sessionId)).status).toBe("cleared");
      expect((await host.store.append(sessionId, [note("a"), note("b"), note("c")])).status).toBe("appended");
      let left = during;
      beforeProjection = async (id) => {
        if (id !== sessionId || left <= 0) return;
        left--;
        expect((await host.store.clear(id)).status).toBe("cleared");
        expect((await host.store.append(id, [note(`during ${during - left}`)])).status).toBe("appended");
      };
      const reply = await view(sessionId);
      beforeProjection = undefined;
      if (during === 1) {
        expect(reply.status).toBe(200);
        expect(reply.json.messages.map((m) => m.content)).toEqual(["during 1"]);
      } else {
        expect([reply.status, reply.json]).toEqual([409, { error: "session_busy" }]);
      }
    }
  });

  it("a transcript kept from before a clear is not shown after it", async () => {
    const host = await hostWithHook();
    await host.store.create({ sessionId: "kept", owner: "alice", model: "demo-fast" });
    expect((await host.store.append("kept", [note("old")])).status).toBe("appended");
    expect((await view("kept")).json.messages.map((m) => m.content)).toEqual(["old"]);
    expect((await host.store.clear("kept")).status).toBe("cleared");
    expect((await host.store.append("kept", [note("new 1"), note("new 2")])).status).toBe("appended");
    const after = await view("kept");
    expect(after.json.messages.map((m) => m.content)).toEqual(["new 1", "new 2"]);
    expect([after.json.seq, after.json.epoch]).toEqual(Object.values(await head("kept")));
  });

  it("folds a log of exactly its data bound; one byte less refuses it transcript_too_large", async () => {
    const host = await hostWithHook();
    await host.store.create({ sessionId: "exact", owner: "alice", model: "demo-fast" });
    expect((await host.store.append("exact", [note("a".repeat(5000)), note("b")])).status).toBe("appended");
    const log = await readWholeLog(host.store, "exact");
    if (log.status !== "ok") throw new Error(log.status);
    const read = (maxDataBytes: number) =>
      readSessionTranscript(host.host, { name: "alice", admin: false }, "exact", { maxDataBytes });
    expect((await read(log.dataBytes)).transcript.lastSeq).toBe(log.headSeq);
    await expect(read(log.dataBytes - 1)).rejects.toMatchObject({
      code: "transcript_too_large",
      data: { sessionId: "exact", maxDataBytes: log.dataBytes - 1 },
    });
  });
});
