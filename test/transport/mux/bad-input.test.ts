import { describe, expect, it } from "vitest";
import { encodeFrame } from "../../../protocol/codec.js";
import type { WireError } from "../../../protocol/index.js";
import { until } from "../../support/until.js";
import { createSession, openCanary } from "./mux-fixture.js";
import { refusalHost } from "./refusal-host.js";

const b = (...parts: (number | number[])[]) => Uint8Array.from(parts.flat());
const fixstr = (s: string) => {
  const bytes = Array.from(new TextEncoder().encode(s));
  return [0xa0 | bytes.length, ...bytes];
};
/** `{type:"call", id:1, method:"session.models"}` with one key replaced by `badKey`. */
const callWithKey = (badKey: number[]) =>
  b(
    0x84,
    fixstr("type"),
    fixstr("call"),
    fixstr("id"),
    0x01,
    fixstr("method"),
    fixstr("session.models"),
    badKey,
    0xc0,
  );

/** Frames that cannot be tied to an id: answered `bad_frame` without id. */
const UNTIED: [string, Uint8Array | string][] = [
  ["text frame", '{"type":"call","id":1}'],
  ["empty frame", b()],
  ["truncated msgpack", encodeFrame({ type: "call", id: 1, method: "session.models" }).slice(0, 10)],
  ["trailing bytes", b(Array.from(encodeFrame({ type: "call", id: 1, method: "session.models" })), 0xc0)],
  ["top-level array", encodeFrame([1, 2, 3])],
  ["top-level string", encodeFrame("call")],
  ["top-level integer", encodeFrame(7)],
  ["top-level nil", encodeFrame(null)],
  ["top-level binary", encodeFrame(new Uint8Array([1, 2]))],
  ["10,000-deep nesting", b(new Array(10_000).fill(0x91), 0xc0)],
  ["dd ff ff ff ff", b(0xdd, 0xff, 0xff, 0xff, 0xff)],
  ["24,000 chained dc ff ff", b(new Array(24_000).fill([0xdc, 0xff, 0xff]).flat())],
  ["huge str prefix", b(0x81, fixstr("type"), 0xdb, 0x7f, 0xff, 0xff, 0xff, 0x61)],
  ["huge bin prefix", b(0x81, fixstr("data"), 0xc6, 0x7f, 0xff, 0xff, 0xff, 0x00)],
  ["extension type", b(0x81, fixstr("id"), 0xd4, 0x05, 0x01)],
  ["timestamp extension", b(0x81, fixstr("at"), 0xd6, 0xff, 0, 0, 0, 1)],
  ["__proto__ key", callWithKey(fixstr("__proto__"))],
  ["constructor key", callWithKey(fixstr("constructor"))],
  ["non-string key", callWithKey([0x07])],
  ["invalid UTF-8", b(0x82, fixstr("type"), 0xa4, 0x63, 0xff, 0x6c, 0x6c, fixstr("id"), 0x01)],
  ["missing id", encodeFrame({ type: "call", method: "session.models" })],
  ["negative id", encodeFrame({ type: "call", id: -1, method: "session.models" })],
  ["zero id", encodeFrame({ type: "call", id: 0, method: "session.models" })],
  ["fractional id", encodeFrame({ type: "call", id: 1.5, method: "session.models" })],
  ["string id", encodeFrame({ type: "call", id: "1", method: "session.models" })],
  ["id above 2^53", encodeFrame({ type: "call", id: 2 ** 53 + 2, method: "session.models" })],
  [
    "uint64 id above 2^53",
    b(
      0x83,
      fixstr("type"),
      fixstr("call"),
      fixstr("id"),
      0xcf,
      0,
      0x20,
      0,
      0,
      0,
      0,
      0,
      1,
      fixstr("method"),
      fixstr("session.models"),
    ),
  ],
  ["object id", encodeFrame({ type: "call", id: { n: 1 }, method: "session.models" })],
];

describe("bad input (protocol-v1 §7): each answered, nothing durable changed, a canary follower on the same socket unaffected", () => {
  let canary: Awaited<ReturnType<typeof openCanary>>;

  const shared = refusalHost(async (host, peer) => {
    canary = await openCanary(host, peer);
  });

  /** The input was answered: every table holds exactly what it held before; then the canary. */
  async function contained(): Promise<void> {
    shared.expectUnchanged();
    await canary.check();
  }

  for (const [name, frame] of UNTIED) {
    it(`${name} → bad_frame without id`, async () => {
      const seen = shared.peer.unidentifiedErrors().length;
      shared.peer.sendRaw(frame, typeof frame !== "string");
      const error = await shared.peer.waitUnidentifiedError(seen + 1);
      expect(error.code).toBe("bad_frame");
      expect(error.category).toBe("protocol");
      await contained();
    });
  }

  async function answerTo(frame: Record<string, unknown>): Promise<WireError> {
    const id = frame.id as number;
    shared.peer.send(frame);
    const answer = await shared.peer.waitTerminal(id);
    expect(answer.type).toBe("error");
    return answer.error as WireError;
  }

  it.each([
    ["unknown type", { type: "subscribe", method: "session.models" }, "bad_frame"],
    ["method not a string", { type: "call", method: 42 }, "bad_frame"],
    ["unknown method", { type: "call", method: "session.explode" }, "unknown_method"],
    [
      "a call of a stream method",
      { type: "call", method: "session.follow", params: { sessionId: "x" } },
      "unknown_method",
    ],
    ["an open of a call method", { type: "open", method: "session.list" }, "unknown_method"],
  ])("%s → %s with the id", async (_name, frame, code) => {
    const id = shared.peer.nextId();
    expect((await answerTo({ ...frame, id })).code).toBe(code);
    await contained();
  });

  const badParams: [string, string, unknown, string][] = [
    ["limit 0", "session.list", { limit: 0 }, "/limit"],
    ["limit negative", "session.list", { limit: -1 }, "/limit"],
    ["limit 1e9", "session.list", { limit: 1e9 }, "/limit"],
    ["limit NaN", "session.list", { limit: Number.NaN }, "/limit"],
    ["limit Infinity", "session.list", { limit: Number.POSITIVE_INFINITY }, "/limit"],
    ["limit of the wrong type", "session.list", { limit: "10" }, "/limit"],
    ["an unknown field", "session.list", { limit: 10, extra: true }, "/extra"],
    ["params not a map", "session.list", [1, 2], "/"],
    ["empty session id", "session.page", { sessionId: "" }, "/sessionId"],
    ["300-char session id", "session.page", { sessionId: "a".repeat(300) }, "/sessionId"],
    ["../.. session id", "session.page", { sessionId: "../.." }, "/sessionId"],
    ["session id with /", "session.page", { sessionId: "a/b" }, "/sessionId"],
    ["session id with \\", "session.page", { sessionId: "a\\b" }, "/sessionId"],
    ["session id with NUL", "session.page", { sessionId: "a\u0000b" }, "/sessionId"],
    ["session id with RTL override", "session.page", { sessionId: "a\u202eb" }, "/sessionId"],
    ["non-ASCII session id", "session.page", { sessionId: "séance" }, "/sessionId"],
    ["missing session id", "session.page", {}, "/sessionId"],
    ["negative cursor", "session.page", { sessionId: "s", afterSeq: -1 }, "/afterSeq"],
    ["follow with a fractional cursor", "session.follow", { sessionId: "s", afterSeq: 1.5 }, "/afterSeq"],
    ["follow with a wrong epoch type", "session.follow", { sessionId: "s", epoch: 7 }, "/epoch"],
    ["control with params", "session.control", { everything: true }, "/everything"],
  ];
  for (const [name, method, params, field] of badParams) {
    it(`${method}: ${name} → bad_request naming ${field}`, async () => {
      const id = shared.peer.nextId();
      const type = method === "session.follow" || method === "session.control" ? "open" : "call";
      const error = await answerTo({ type, id, method, params });
      expect(error.code).toBe("bad_request");
      expect((error.data as { field: string }).field.startsWith(field)).toBe(true);
      await contained();
    });
  }

  it("an id in flight reused → duplicate_id without id; the original stream is untouched", async () => {
    const id = shared.peer.follow(canary.sessionId);
    await shared.peer.waitItem(id, (i) => i.kind === "caughtUp");
    const seen = shared.peer.unidentifiedErrors().length;
    shared.peer.send({ type: "call", id, method: "session.models" });
    const error = await shared.peer.waitUnidentifiedError(seen + 1);
    expect(error.code).toBe("duplicate_id");
    expect(error.data).toEqual({ id });
    shared.peer.send({ type: "open", id, method: "session.control" });
    expect((await shared.peer.waitUnidentifiedError(seen + 2)).code).toBe("duplicate_id");
    shared.peer.send({ type: "bogus", id });
    expect((await shared.peer.waitUnidentifiedError(seen + 3)).code).toBe("duplicate_id");
    expect(shared.peer.terminal(id)).toBeUndefined();
    await contained();
    expect(shared.peer.lastSeq(id)).toBe(shared.peer.lastSeq(canary.id));
    shared.peer.close(id);
    expect((await shared.peer.waitTerminal(id)).type).toBe("end");
  });

  it("one stream over the limit → too_many_streams; the open ones keep working", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 255; i++) ids.push(shared.peer.follow(canary.sessionId));
    await until(
      () => ids.every((id) => shared.peer.items(id).some((item) => item.kind === "caughtUp")),
      30_000,
      "255 followers",
    );
    const over = shared.peer.follow(canary.sessionId);
    const answer = await shared.peer.waitTerminal(over);
    expect(answer.error).toMatchObject({
      code: "too_many_streams",
      message: "at most 256 streams per socket; close one first",
      data: { limit: "streams_per_socket", max: 256 },
    });
    await contained();
    for (const id of ids) shared.peer.close(id);
    await until(() => ids.every((id) => shared.peer.terminal(id)?.type === "end"), 30_000, "ends");
    const again = shared.peer.follow(canary.sessionId);
    await shared.peer.waitItem(again, (i) => i.kind === "caughtUp");
    shared.peer.close(again);
  });

  it("unknown session → session_not_found (call and follow)", async () => {
    expect((await shared.peer.callError("session.page", { sessionId: "nope" })).code).toBe(
      "session_not_found",
    );
    const id = shared.peer.follow("nope");
    expect((await shared.peer.waitTerminal(id)).error?.code).toBe("session_not_found");
    await contained();
  });

  it("unknown interaction → interaction_not_found", async () => {
    const error = await shared.peer.callError("session.respond", {
      interactionId: "nope",
      response: { outcome: "approve" },
    });
    expect(error.code).toBe("interaction_not_found");
    await contained();
  });

  it("deleted session → session_retired for writes, re-create and follow", async () => {
    const sessionId = await createSession(shared.peer);
    await shared.peer.call("session.delete", { sessionId });
    // the writes refused after the tombstone change nothing
    await shared.takeBaseline();
    expect((await shared.peer.callError("session.rename", { sessionId, title: "t" })).code).toBe(
      "session_retired",
    );
    expect((await shared.peer.callError("session.create", { sessionId })).code).toBe("session_retired");
    const id = shared.peer.follow(sessionId);
    expect((await shared.peer.waitTerminal(id)).error?.code).toBe("session_retired");
    await contained();
  });

  it("fork at a seq past the source's head → bad_request naming /atSeq and the head; nothing created", async () => {
    const sourceId = await createSession(shared.peer);
    await shared.takeBaseline();
    const error = await shared.peer.callError("session.fork", { sourceId, sessionId: "fork-past", atSeq: 2 });
    expect(error).toMatchObject({ code: "bad_request", data: { field: "/atSeq", headSeq: 1 } });
    expect(shared.host.host.live.isLive("fork-past")).toBe(false);
    await contained();
  });

  it("live-only call with no live agent → agent_not_live", async () => {
    // Created straight in the store: durable, never activated.
    const created = await shared.host.store.create({ sessionId: "cold-one", owner: "admin", model: "demo" });
    expect(created.status).toBe("created");
    expect(shared.host.host.live.isLive("cold-one")).toBe(false);
    await shared.takeBaseline();
    expect((await shared.peer.callError("session.cancel", { sessionId: "cold-one" })).code).toBe(
      "agent_not_live",
    );
    await contained();
  });
});
