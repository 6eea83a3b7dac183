import { describe, expect, it } from "vitest";
import type { NewEvent, SessionEvent } from "../../../protocol/index.js";
import { applyEvents, emptyTranscript } from "../../../protocol/transcript.js";
import type { SessionProjection } from "../../../src/store/session-store.js";
import type { SessionSnapshot } from "../../../src/transport/http/session-transcript.js";
import { renderSessionView, sessionView } from "../../../src/transport/http/session-view.js";

const events: NewEvent[] = [
  { type: "session/created", data: { title: "demo", origin: "cli" } },
  { type: "turn/start", data: { turnId: "t1", trigger: "prompt" } },
  {
    type: "user/message",
    data: { messageId: "m1", source: "user", text: "hé ✓", attachments: [], meta: {} },
  },
  {
    type: "user/message",
    data: { messageId: "m0", source: "user", text: "", hidden: true, attachments: [], meta: {} },
  },
  { type: "assistant/delta", data: { turnId: "t1", text: "ok \u2028 done" } },
  {
    type: "interaction/requested",
    data: { turnId: "t1", interactionId: "i1", kind: "question", question: "why?" },
  },
];

function snapshot(from: NewEvent[] = events): SessionSnapshot {
  const committed = from.map((e, i) => ({ seq: i + 1, at: 1000 + i, ...e }) as SessionEvent);
  const projection = {
    title: "demo",
    updatedAt: 2000,
    hasUnseenCompletion: false,
    completionSettledAt: null,
  } as unknown as SessionProjection;
  return {
    transcript: applyEvents(emptyTranscript(), committed),
    projection,
    createdAt: 1000,
    epoch: "e1",
    dataBytes: 0,
  };
}

describe("session view rendering", () => {
  it("the cached, pieced-together JSON equals the plain serialization", async () => {
    const snap = snapshot();
    const live = [
      {
        interactionId: "i2",
        sessionId: "s",
        turnId: "t1",
        kind: "approval" as const,
        requestedAt: 1010,
        action: "rm",
      },
    ];
    const plain = JSON.parse(JSON.stringify(sessionView("s", snap, live)));
    for (let i = 0; i < 2; i++) {
      const pieced = JSON.parse(Buffer.concat(await renderSessionView("s", snap, live)).toString("utf8"));
      expect(pieced).toEqual(plain);
    }
    expect(plain).toMatchObject({
      id: "s",
      title: "demo",
      origin: "cli",
      kind: "chat",
      message_count: 2,
      is_streaming: true,
      pending_questions: [
        {
          interaction_id: "i1",
          session_id: "s",
          turn_id: "t1",
          kind: "question",
          requested_at_ms: 1005,
          question: "why?",
        },
        {
          interaction_id: "i2",
          session_id: "s",
          turn_id: "t1",
          kind: "approval",
          requested_at_ms: 1010,
          action: "rm",
        },
      ],
    });
    expect(plain.messages.map((m: { id: number; message_id: string }) => [m.id, m.message_id])).toEqual([
      [1, "m1"],
      [3, "t1.0"],
    ]);
    expect(plain).toMatchObject({ seq: events.length, epoch: "e1" });
  });

  it("orders pending questions by request time, then id, whatever order live state lists them in", () => {
    const live = [
      { interactionId: "i9", sessionId: "s", turnId: "t1", kind: "question" as const, requestedAt: 1030 },
      { interactionId: "i4", sessionId: "s", turnId: "t1", kind: "question" as const, requestedAt: 1020 },
      { interactionId: "i3", sessionId: "s", turnId: "t1", kind: "question" as const, requestedAt: 1020 },
      { interactionId: "i0", sessionId: "s", turnId: "t1", kind: "question" as const, requestedAt: 1001 },
    ];
    const ids = (view: { pending_questions: { interaction_id: string }[] }) =>
      view.pending_questions.map((q) => q.interaction_id);
    // i1 is the log's own pending question (requested at 1005)
    expect(ids(sessionView("s", snapshot(), live))).toEqual(["i0", "i1", "i3", "i4", "i9"]);
    expect(ids(sessionView("s", snapshot(), [...live].reverse()))).toEqual(["i0", "i1", "i3", "i4", "i9"]);
  });
});

describe("a long view is serialized in slices (docs/reliability.md, Limits)", () => {
  it("lets the event loop run between slices of its messages, and gives the plain serialization", async () => {
    // 400 messages of 4,000 characters: about 1.7 MB of JSON, more than 6 slices
    const long: NewEvent[] = [
      { type: "session/created", data: { title: "long" } },
      ...Array.from(
        { length: 400 },
        (_, i): NewEvent => ({
          type: "user/message",
          data: {
            messageId: `m${i}`,
            source: "user",
            text: `${i} ${"w".repeat(4000)}`,
            attachments: [],
            meta: {},
          },
        }),
      ),
    ];
    const snap = snapshot(long);
    let turns = 0;
    let rendering = true;
    const count = () => {
      if (!rendering) return;
      turns++;
      setImmediate(count);
    };
    setImmediate(count);
    const parts = await renderSessionView("s", snap, []);
    rendering = false;
    // slices of 256 KiB of JSON: a turn of the loop after each of the first 6
    expect(turns).toBeGreaterThanOrEqual(6);
    expect(JSON.parse(Buffer.concat(parts).toString("utf8"))).toEqual(
      JSON.parse(JSON.stringify(sessionView("s", snap, []))),
    );
    // served again from the pieces kept for this state, with no turn of the loop
    turns = 0;
    rendering = true;
    setImmediate(count);
    const again = await renderSessionView("s", snap, []);
    rendering = false;
    expect(turns).toBe(0);
    expect(Buffer.concat(again).equals(Buffer.concat(parts))).toBe(true);
  });
});
