import { describe, expect, it } from "vitest";
import { isRefusal, parseClientFrame } from "../../src/transport/mux/client-frame.js";

/**
 * The bounds protocol-v1 §4 and §5 set on every method's params ("Bounds of params"), written
 * here by hand from that page, not read back from `protocol/methods.ts`: each bound is checked on
 * the frame parser the mux runs (the host's own `call` uses the same validator) at its limit,
 * which passes, and one past it, which is `bad_request` naming the field (§7).
 */

const ID = "a".repeat(128);
const TOO_LONG_ID = "a".repeat(129);

/** Valid params for every method; each case changes one field of its method's. */
const base: Record<string, Record<string, unknown>> = {
  "session.list": {},
  "session.page": { sessionId: "s" },
  "session.search": { query: "q" },
  "session.models": {},
  "session.attachment": { sessionId: "s", attachmentId: "a" },
  "session.create": {},
  "session.fork": { sourceId: "s" },
  "session.prompt": { sessionId: "s", text: "hi", clientMessageId: "m" },
  "session.rename": { sessionId: "s", title: "t" },
  "session.selectModel": { sessionId: "s", model: "m" },
  "session.cancel": { sessionId: "s" },
  "session.updateQueue": { sessionId: "s", op: { clear: true } },
  "session.respond": { interactionId: "i", response: { outcome: "approve" } },
  "session.ack": { sessionId: "s", completionSettledAt: 1 },
  "session.clear": { sessionId: "s" },
  "session.dismiss": { sessionId: "s" },
  "session.restore": { sessionId: "s" },
  "session.delete": { sessionId: "s" },
  "session.follow": { sessionId: "s" },
  "session.control": {},
  "session.download": { sessionId: "s", attachmentId: "a" },
};

const STREAMS = new Set(["session.follow", "session.control", "session.download"]);

interface Bound {
  method: string;
  /** JSON pointer of the field, as `data.field` names it. */
  field: string;
  /** The params' value at the limit (accepted) and one past it (refused). */
  atLimit: unknown;
  pastLimit: unknown;
}

const attachment = { name: "f.txt", type: "text/plain" };
const bytes = (n: number) => new Uint8Array(n);

const bounds: Bound[] = [
  // §1: ids are 1–128 characters of [A-Za-z0-9_-]; interaction, queue item and message ids too
  ...[
    ["session.page", "/sessionId"],
    ["session.attachment", "/sessionId"],
    ["session.attachment", "/attachmentId"],
    ["session.create", "/sessionId"],
    ["session.fork", "/sourceId"],
    ["session.fork", "/sessionId"],
    ["session.prompt", "/sessionId"],
    ["session.prompt", "/clientMessageId"],
    ["session.rename", "/sessionId"],
    ["session.selectModel", "/sessionId"],
    ["session.cancel", "/sessionId"],
    ["session.updateQueue", "/sessionId"],
    ["session.respond", "/interactionId"],
    ["session.ack", "/sessionId"],
    ["session.clear", "/sessionId"],
    ["session.dismiss", "/sessionId"],
    ["session.restore", "/sessionId"],
    ["session.delete", "/sessionId"],
    ["session.follow", "/sessionId"],
    ["session.download", "/sessionId"],
    ["session.download", "/attachmentId"],
  ].flatMap(([method, field]) => [
    { method: method!, field: field!, atLimit: ID, pastLimit: TOO_LONG_ID },
    { method: method!, field: field!, atLimit: "a", pastLimit: "" },
    { method: method!, field: field!, atLimit: "A-z_9", pastLimit: "a.b" },
  ]),
  // session.list
  { method: "session.list", field: "/limit", atLimit: 200, pastLimit: 201 },
  { method: "session.list", field: "/limit", atLimit: 1, pastLimit: 0 },
  { method: "session.list", field: "/limit", atLimit: 7, pastLimit: 7.5 },
  { method: "session.list", field: "/before", atLimit: "c".repeat(512), pastLimit: "c".repeat(513) },
  // session.page
  { method: "session.page", field: "/limit", atLimit: 1000, pastLimit: 1001 },
  { method: "session.page", field: "/limit", atLimit: 1, pastLimit: 0 },
  { method: "session.page", field: "/beforeSeq", atLimit: 1, pastLimit: 0 },
  { method: "session.page", field: "/afterSeq", atLimit: 0, pastLimit: -1 },
  { method: "session.page", field: "/beforeSeq", atLimit: 2, pastLimit: 1.5 },
  // session.search
  { method: "session.search", field: "/query", atLimit: "q".repeat(512), pastLimit: "q".repeat(513) },
  { method: "session.search", field: "/query", atLimit: "q", pastLimit: "" },
  { method: "session.search", field: "/limit", atLimit: 200, pastLimit: 201 },
  { method: "session.search", field: "/limit", atLimit: 1, pastLimit: 0 },
  { method: "session.search", field: "/limit", atLimit: 2, pastLimit: 1.5 },
  // session.create
  { method: "session.create", field: "/title", atLimit: "t".repeat(512), pastLimit: "t".repeat(513) },
  { method: "session.create", field: "/model", atLimit: "m".repeat(256), pastLimit: "m".repeat(257) },
  { method: "session.create", field: "/origin", atLimit: "o".repeat(64), pastLimit: "o".repeat(65) },
  { method: "session.create", field: "/origin", atLimit: "o", pastLimit: "" },
  // session.fork
  { method: "session.fork", field: "/atSeq", atLimit: 0, pastLimit: -1 },
  { method: "session.fork", field: "/atSeq", atLimit: 1, pastLimit: 0.5 },
  // session.prompt
  {
    method: "session.prompt",
    field: "/text",
    atLimit: "x".repeat(1_000_000),
    pastLimit: "x".repeat(1_000_001),
  },
  {
    method: "session.prompt",
    field: "/display",
    atLimit: "x".repeat(1_000_000),
    pastLimit: "x".repeat(1_000_001),
  },
  {
    method: "session.prompt",
    field: "/attachments",
    atLimit: Array.from({ length: 32 }, () => attachment),
    pastLimit: Array.from({ length: 33 }, () => attachment),
  },
  {
    method: "session.prompt",
    field: "/attachments/0/name",
    atLimit: [{ ...attachment, name: "n".repeat(256) }],
    pastLimit: [{ ...attachment, name: "n".repeat(257) }],
  },
  {
    method: "session.prompt",
    field: "/attachments/0/name",
    atLimit: [{ ...attachment, name: "n" }],
    pastLimit: [{ ...attachment, name: "" }],
  },
  {
    method: "session.prompt",
    field: "/attachments/0/type",
    atLimit: [{ ...attachment, type: "t".repeat(256) }],
    pastLimit: [{ ...attachment, type: "t".repeat(257) }],
  },
  {
    method: "session.prompt",
    field: "/attachments/0/url",
    atLimit: [{ ...attachment, url: "u".repeat(4096) }],
    pastLimit: [{ ...attachment, url: "u".repeat(4097) }],
  },
  {
    method: "session.prompt",
    field: "/attachments/0/bytes",
    atLimit: [{ ...attachment, bytes: bytes(512 * 1024) }],
    pastLimit: [{ ...attachment, bytes: bytes(512 * 1024 + 1) }],
  },
  {
    method: "session.prompt",
    field: "/attachments/0/attachmentId",
    atLimit: [{ ...attachment, attachmentId: ID }],
    pastLimit: [{ ...attachment, attachmentId: TOO_LONG_ID }],
  },
  {
    method: "session.prompt",
    field: "/attachments/0/extra",
    atLimit: [attachment],
    pastLimit: [{ ...attachment, extra: 1 }],
  },
  {
    method: "session.prompt",
    field: "/meta/origin",
    atLimit: { origin: "o".repeat(64) },
    pastLimit: { origin: "o".repeat(65) },
  },
  {
    method: "session.prompt",
    field: "/meta/voiceDurationMs",
    atLimit: { voiceDurationMs: 86_400_000 },
    pastLimit: { voiceDurationMs: 86_400_001 },
  },
  {
    method: "session.prompt",
    field: "/meta/voiceDurationMs",
    atLimit: { voiceDurationMs: 0 },
    pastLimit: { voiceDurationMs: -1 },
  },
  {
    method: "session.prompt",
    field: "/meta/unnamed",
    atLimit: { incognito: true, hidden: true, hitlResume: true, voiceInput: true },
    pastLimit: { unnamed: 1 },
  },
  {
    method: "session.prompt",
    field: "/meta/voiceLanguage",
    atLimit: { voiceLanguage: "l".repeat(35) },
    pastLimit: { voiceLanguage: "l".repeat(36) },
  },
  // session.rename, session.selectModel
  { method: "session.rename", field: "/title", atLimit: "t".repeat(512), pastLimit: "t".repeat(513) },
  { method: "session.selectModel", field: "/model", atLimit: "m".repeat(256), pastLimit: "m".repeat(257) },
  { method: "session.selectModel", field: "/model", atLimit: "m", pastLimit: "" },
  // session.updateQueue: an op is one of four shapes; a refusal names the field of the shape the
  // op came closest to
  {
    method: "session.updateQueue",
    field: "/op/text",
    atLimit: { edit: true, itemId: "i", text: "e".repeat(16_000) },
    pastLimit: { edit: true, itemId: "i", text: "e".repeat(16_001) },
  },
  ...["remove", "edit", "steer"].map((verb) => ({
    method: "session.updateQueue",
    field: "/op/itemId",
    atLimit: { [verb]: true, itemId: ID, ...(verb === "edit" ? { text: "e" } : {}) },
    pastLimit: { [verb]: true, itemId: TOO_LONG_ID, ...(verb === "edit" ? { text: "e" } : {}) },
  })),
  {
    method: "session.updateQueue",
    field: "/op/x",
    atLimit: { clear: true },
    pastLimit: { clear: true, x: 1 },
  },
  // session.respond: an answer is at most 16,000 characters
  {
    method: "session.respond",
    field: "/response/answer",
    atLimit: { answer: "a".repeat(16_000) },
    pastLimit: { answer: "a".repeat(16_001) },
  },
  // session.respond: a response is exactly one of the two shapes, and an outcome approves or denies
  {
    method: "session.respond",
    field: "/response/outcome",
    atLimit: { outcome: "deny" },
    pastLimit: { outcome: "maybe" },
  },
  {
    method: "session.respond",
    field: "/response/note",
    atLimit: { outcome: "approve" },
    pastLimit: { outcome: "approve", note: "x" },
  },
  {
    method: "session.respond",
    field: "/response/note",
    atLimit: { answer: "a" },
    pastLimit: { answer: "a", note: "x" },
  },
  // session.ack, session.clear
  { method: "session.ack", field: "/completionSettledAt", atLimit: 0, pastLimit: -1 },
  { method: "session.ack", field: "/completionSettledAt", atLimit: 0.5, pastLimit: -0.5 },
  {
    method: "session.clear",
    field: "/expectedEpoch",
    atLimit: "e".repeat(128),
    pastLimit: "e".repeat(129),
  },
  // §5 streams
  { method: "session.follow", field: "/afterSeq", atLimit: 0, pastLimit: -1 },
  { method: "session.follow", field: "/epoch", atLimit: "e".repeat(128), pastLimit: "e".repeat(129) },
  { method: "session.download", field: "/offset", atLimit: 0, pastLimit: -1 },
  { method: "session.download", field: "/offset", atLimit: 1, pastLimit: 0.5 },
];

function frame(method: string, params: Record<string, unknown>) {
  return { id: 1, type: STREAMS.has(method) ? "open" : "call", method, params };
}

/**
 * `params` with the top field of `pointer` set to `value`: a case about a nested field
 * (`/attachments/0/name`) writes its whole top field.
 */
function withField(params: Record<string, unknown>, pointer: string, value: unknown) {
  const [name] = pointer.slice(1).split("/");
  return { ...params, [name!]: value };
}

describe("the bounds of every method's params (protocol-v1 §4, §5)", () => {
  it.each(bounds.map((b) => [`${b.method} ${b.field} ${describeValue(b.pastLimit)}`, b] as const))(
    "%s: the limit passes, one past it is bad_request",
    (_name, b) => {
      const params = base[b.method]!;
      const accepted = parseClientFrame(frame(b.method, withField(params, b.field, b.atLimit)), () => false);
      expect(isRefusal(accepted) ? accepted.refused.message : "accepted").toBe("accepted");
      const refused = parseClientFrame(frame(b.method, withField(params, b.field, b.pastLimit)), () => false);
      if (!isRefusal(refused)) throw new Error("one past the limit was accepted");
      expect({ code: refused.refused.code, data: refused.refused.data }).toEqual({
        code: "bad_request",
        data: { field: b.field },
      });
    },
  );

  it.each(Object.keys(base))("%s refuses a field the contract does not name", (method) => {
    const refused = parseClientFrame(frame(method, { ...base[method], unnamed: 1 }), () => false);
    if (!isRefusal(refused)) throw new Error("an unknown field was accepted");
    expect({ code: refused.refused.code, data: refused.refused.data }).toEqual({
      code: "bad_request",
      data: { field: "/unnamed" },
    });
  });
});

function describeValue(value: unknown): string {
  if (typeof value === "string") return `"${value.slice(0, 3)}…" (${value.length})`;
  if (Array.isArray(value)) return `[${value.length}]`;
  if (value && typeof value === "object") return JSON.stringify(value).slice(0, 40);
  return String(value);
}
