import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Interaction, SessionEvent } from "../../../protocol/index.js";
import { applyEvents, emptyTranscript } from "../../../protocol/transcript.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { connect, createSession, expectRange } from "../mux/mux-fixture.js";
import { api, waitForState } from "./http-client.js";

/** The rules of `GET /v1/sessions/{id}` that a client builds on: cursor, ids, stop flags, one interaction shape. */

interface View {
  seq: number;
  epoch: string;
  is_streaming: boolean;
  messages: {
    id: number;
    message_id: string;
    role: string;
    content: string;
    metadata: Record<string, unknown>;
  }[];
  pending_questions: Record<string, unknown>[];
}

let h: TestHost;
beforeAll(async () => {
  h = await startTestHost();
});
afterAll(async () => {
  await h?.dispose();
});

/** Runs `test` with a fresh admin socket, closed afterwards whatever happens. */
async function withPeer(test: (peer: MuxPeer) => Promise<void>): Promise<void> {
  const peer = await connect(h);
  try {
    await test(peer);
  } finally {
    await peer.disconnect();
  }
}

async function view(sessionId: string): Promise<View> {
  const r = await api(h, `/v1/sessions/${sessionId}`, { token: ADMIN_TOKEN });
  expect(r.status).toBe(200);
  return r.json as View;
}

/** The control stream's camelCase field names in the view's spelling: snake_case, `…At` as `…_at_ms`. */
function snakeCase(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    const snake = key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    out[key.endsWith("At") ? `${snake}_ms` : snake] = v;
  }
  return out;
}

describe("GET /v1/sessions/{id} rules", () => {
  it("names the cursor it was rendered at: a follow from (seq, epoch) continues with no gap and no repeat", async () =>
    withPeer(async (peer) => {
      const sessionId = await createSession(peer);
      await peer.call("session.prompt", { sessionId, text: "first", clientMessageId: "c1" });
      await waitForState(h, sessionId);
      const rendered = await view(sessionId);
      const head = await h.store.header(sessionId);
      expect(head.status === "ok" && [head.headSeq, head.header.epoch]).toEqual([
        rendered.seq,
        rendered.epoch,
      ]);
      const id = peer.follow(sessionId, { afterSeq: rendered.seq, epoch: rendered.epoch });
      await peer.waitItem(id, (i) => i.kind === "caughtUp");
      await peer.call("session.prompt", { sessionId, text: "second", clientMessageId: "c2" });
      await waitForState(h, sessionId);
      const after = await view(sessionId);
      await peer.waitSeq(id, after.seq);
      expect(peer.items(id).some((i) => i.kind === "reset")).toBe(false);
      expectRange(peer.events(id), rendered.seq + 1, after.seq);
      const added = peer.events(id).filter((e: SessionEvent) => e.type === "user/message");
      expect(added.map((e) => (e.type === "user/message" ? e.data.text : ""))).toEqual(["second"]);
    }));

  it("renders messages exactly as the log up to its seq folds, while a turn streams", async () =>
    withPeer(async (peer) => {
      const sessionId = await createSession(peer);
      await peer.call("session.prompt", { sessionId, text: "/stream 400 1", clientMessageId: "c1" });
      const seen = new Set<number>();
      let streaming = true;
      for (let read = 0; read < 500 && streaming; read++) {
        const rendered = await view(sessionId);
        streaming = rendered.is_streaming;
        seen.add(rendered.seq);
        const log = await h.store.readAfter(sessionId, 0, rendered.seq);
        if (log.status !== "ok") throw new Error(log.status);
        const folded = applyEvents(emptyTranscript(), log.events);
        expect(rendered.messages.map((m) => m.content)).toEqual(folded.messages.map((m) => m.text));
        expect(rendered.is_streaming).toBe(folded.streaming);
      }
      expect(seen.size).toBeGreaterThan(1);
    }));

  it("gives each message a stable integer id 1, 2, 3… and keeps the stored id as message_id", async () =>
    withPeer(async (peer) => {
      const sessionId = await createSession(peer);
      await peer.call("session.prompt", { sessionId, text: "one", clientMessageId: "c1" });
      await waitForState(h, sessionId);
      const first = await view(sessionId);
      await peer.call("session.prompt", { sessionId, text: "two", clientMessageId: "c2" });
      await waitForState(h, sessionId);
      const second = await view(sessionId);
      expect(second.messages.map((m) => m.id)).toEqual([1, 2, 3, 4]);
      expect(second.messages.slice(0, 2)).toEqual(first.messages);
      expect(second.messages[0]!.message_id).toMatch(/^[0-9a-f-]{36}$/);
      expect(second.messages[1]!.message_id).toBe(`${second.messages[1]!.metadata.turn_id}.0`);
    }));

  it("reports interrupted: true for a turn stopped early, cancelled included", async () =>
    withPeer(async (peer) => {
      const sessionId = await createSession(peer);
      await peer.call("session.prompt", { sessionId, text: "done", clientMessageId: "c1" });
      await waitForState(h, sessionId);
      await peer.call("session.prompt", { sessionId, text: "/sleep 600000", clientMessageId: "c2" });
      expect(await peer.call("session.cancel", { sessionId })).toEqual({ cancelled: true });
      await waitForState(h, sessionId, "cancelled");
      const flags = (await view(sessionId)).messages.map((m) => [
        m.metadata.turn_state,
        m.metadata.interrupted,
      ]);
      expect(flags[0]).toEqual(["completed", false]);
      expect(flags.at(-1)).toEqual(["cancelled", true]);
      const turns = await api(h, `/api/chat/sessions/${sessionId}/turns`, { token: ADMIN_TOKEN });
      const rows = (turns.json as { turns: { state: string; metadata: Record<string, unknown> }[] }).turns;
      expect(rows.map((r) => [r.state, r.metadata.interrupted])).toEqual([
        ["canceled", true],
        ["completed", undefined],
      ]);
    }));

  it("renders pending questions as the control stream's Interaction, field for field in snake_case", async () =>
    withPeer(async (peer) => {
      const control = peer.open("session.control");
      await peer.waitItem(control, (i) => i.kind === "baseline");
      const sessionId = await createSession(peer);
      await peer.call("session.prompt", { sessionId, text: "/approve deploy", clientMessageId: "c1" });
      const requested = await peer.waitItem<{ kind: string; interaction: Interaction }>(
        control,
        (i) => i.kind === "interaction.requested" && (i.interaction as Interaction).sessionId === sessionId,
      );
      await waitForState(h, sessionId, "input-required");
      expect((await view(sessionId)).pending_questions).toEqual([snakeCase({ ...requested.interaction })]);
      await peer.call("session.prompt", { sessionId, text: "/ask which colour?", clientMessageId: "c2" });
      await peer.call("session.respond", {
        interactionId: requested.interaction.interactionId,
        response: { outcome: "approve" },
      });
      const question = await peer.waitItem<{ kind: string; interaction: Interaction }>(
        control,
        (i) => i.kind === "interaction.requested" && (i.interaction as Interaction).kind === "question",
      );
      await waitForState(h, sessionId, "input-required");
      expect((await view(sessionId)).pending_questions).toEqual([snakeCase({ ...question.interaction })]);
    }));

  it("returns a prompt's whitelisted metadata in the spec's snake_case spelling, and the session's origin", async () =>
    withPeer(async (peer) => {
      const sessionId = await createSession(peer, { origin: "web" });
      const meta = {
        incognito: true,
        hitlResume: true,
        voiceInput: true,
        voiceDurationMs: 1500,
        voiceLanguage: "de",
      };
      await peer.call("session.prompt", { sessionId, text: "spoken", clientMessageId: "c1", meta });
      await waitForState(h, sessionId);
      const rendered = (await api(h, `/v1/sessions/${sessionId}`, { token: ADMIN_TOKEN })).json as View & {
        origin: string;
      };
      expect(rendered.origin).toBe("web");
      expect(rendered.messages[0]!.metadata).toMatchObject({
        incognito: true,
        hitl_resume: true,
        voice_input: true,
        voice_duration_ms: 1500,
        voice_language: "de",
      });
      expect(rendered.messages[0]!.metadata).not.toHaveProperty("hitlResume");
    }));

  it("skips prompts stamped with an origin or hidden in every rebuilt transcript", async () =>
    withPeer(async (peer) => {
      const sessionId = await createSession(peer);
      const prompts = [
        { text: "typed" },
        { text: "on a schedule", meta: { origin: "scheduler" } },
        { text: "stamped hidden", meta: { hidden: true } },
        { text: "sent hidden", hidden: true },
      ];
      for (const [i, p] of prompts.entries()) {
        await peer.call("session.prompt", { sessionId, clientMessageId: `c${i}`, ...p });
        await waitForState(h, sessionId);
      }
      const users = (await view(sessionId)).messages.filter((m) => m.role === "user");
      expect(users.map((m) => m.content)).toEqual(["typed"]);
      const turns = await api(h, `/api/chat/sessions/${sessionId}/turns`, { token: ADMIN_TOKEN });
      const rows = (turns.json as { turns: { history: { role: string; parts: { text?: string }[] }[] }[] })
        .turns;
      expect(rows).toHaveLength(4);
      const shown = rows.flatMap((r) =>
        r.history.filter((m) => m.role === "user").map((m) => m.parts[0]?.text),
      );
      expect(shown).toEqual(["typed"]);
    }));

  it("serves an inline data: URL attachment as a link to the attachment store, never the payload", async () =>
    withPeer(async (peer) => {
      const sessionId = await createSession(peer);
      const url = `data:text/plain;base64,${Buffer.from("inline note").toString("base64")}`;
      await peer.call("session.prompt", {
        sessionId,
        text: "see attached",
        clientMessageId: "c1",
        attachments: [{ name: "note.txt", type: "", url }],
      });
      await waitForState(h, sessionId);
      const viewReply = await api(h, `/v1/sessions/${sessionId}`, { token: ADMIN_TOKEN });
      const turnsReply = await api(h, `/api/chat/sessions/${sessionId}/turns`, { token: ADMIN_TOKEN });
      for (const reply of [viewReply, turnsReply]) expect(reply.text).not.toContain("data:");
      const shell = (viewReply.json as View & { messages: { attachments?: Record<string, unknown>[] }[] })
        .messages[0]!.attachments![0]!;
      expect(shell).toEqual({
        name: "note.txt",
        type: "text/plain",
        size: 11,
        omittedBytes: 11,
        attachmentId: expect.any(String),
      });
      const rows = (
        turnsReply.json as { turns: { history: { parts: { kind: string; file?: { uri: string } }[] }[] }[] }
      ).turns;
      const uri = rows[0]!.history[0]!.parts.find((p) => p.kind === "file")!.file!.uri;
      expect(uri).toBe(`/v1/attachments/${shell.attachmentId}`);
      const bytes = await api(h, uri, { token: ADMIN_TOKEN });
      expect(bytes.status).toBe(200);
      expect(bytes.text).toBe("inline note");
    }));

  it("titles an untitled session with its first prompt, as the session list does", async () =>
    withPeer(async (peer) => {
      const sessionId = await createSession(peer);
      await peer.call("session.prompt", { sessionId, text: "plan the trip", clientMessageId: "c1" });
      await waitForState(h, sessionId);
      const rendered = (await api(h, `/v1/sessions/${sessionId}`, { token: ADMIN_TOKEN })).json as {
        title: string;
      };
      expect(rendered.title).toBe("plan the trip");
    }));
});
