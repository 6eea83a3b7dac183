import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { SessionmuxError } from "../../protocol/errors.js";
import {
  BEARER_SUBPROTOCOL_PREFIX,
  Limits,
  MUX_PATH,
  PROTOCOL_VERSION,
  SUBPROTOCOL,
} from "../../protocol/limits.js";

/**
 * The defaults protocol-v1 states, each against the words of the contract: a client and a host
 * built from this package must agree with a peer that read only the document.
 */
const KiB = 1024;
const MiB = 1024 * KiB;

describe("protocol-v1 defaults", () => {
  it("§2 transport: the mux path, its subprotocols and the hello's protocol number", () => {
    expect(MUX_PATH).toBe("/api/remote.mux");
    expect(SUBPROTOCOL).toBe("sessionmux.v1");
    expect(BEARER_SUBPROTOCOL_PREFIX).toBe("bearer.");
    expect(PROTOCOL_VERSION).toBe(1);
  });

  it("§2 and §7: frame size, pings, streams and calls per socket", () => {
    expect(Limits.maxPayloadBytes).toBe(1 * MiB); // "a frame over the size limit (default 1 MiB)"
    expect(Limits.pingIntervalMs).toBe(15_000); // "every 15 s by default"
    expect(Limits.backlogGraceIntervals).toBe(4); // "dropped at its 4th such interval in a row"
    expect(Limits.maxStreamsPerSocket).toBe(256); // "too many open streams on one socket (default 256)"
    expect(Limits.maxCallsInFlight).toBe(4); // "default 4 running, 256 waiting"
    expect(Limits.maxQueuedCalls).toBe(256);
    expect(Limits.maxStrBytes).toBe(64 * KiB); // "a string over 64 KiB of UTF-8 anywhere in a frame"
  });

  it("§4 and §5: message text, inline attachments, replay and stream items", () => {
    expect(Limits.maxMessageChars).toBe(16_000); // "text capped at 16,000 characters"
    expect(Limits.maxInlineAttachmentBytes).toBe(512 * KiB); // "`bytes` of at most 512 KiB"
    expect(Limits.replayBatch).toBe(500); // "An item holds at most 500 events"
    expect(Limits.streamItemBytes).toBe(64 * KiB); // "its encoded value is at most 64 KiB"
    expect(Limits.eventItemBytes).toBe(1 * MiB); // a page stops "once its events' data ... reaches 1 MiB"
  });

  it("§7 and §8: event size, quotas, views, uploads and HTTP bodies", () => {
    expect(Limits.maxEventBytes).toBe(1 * MiB); // "an event whose data is over 1 MiB"
    expect(Limits.sessionsPerPrincipal).toBe(10_000); // "default 10,000"
    expect(Limits.storedBytesPerPrincipal).toBe(1024 * MiB); // "default 1 GiB"
    expect(Limits.transcriptViewBytes).toBe(32 * MiB); // "default 32 MiB"
    expect(Limits.maxAttachmentBytes).toBe(10 * MiB); // "upload size (default 10 MiB)"
    expect(Limits.uploadQuotaBytes).toBe(64 * MiB); // "64 MiB ... upload_quota_exceeded"
    expect(Limits.uploadTtlMs).toBe(60 * 60 * 1000); // "within its lifetime (default 1 hour)"
    expect(Limits.maxHttpBodyBytes).toBe(1 * MiB); // "413 over 1 MiB"
  });

  it("§9 backpressure: the follower and send high-water marks", () => {
    expect(Limits.followerHighWaterBytes).toBe(4 * MiB); // "notification high-water mark (default 4 MiB)"
    expect(Limits.sendHighWaterBytes).toBe(4 * MiB); // "(default 4 MiB), the host starts no call"
  });
});

describe("the decoder's default limits, at their edge", () => {
  const bad = (bytes: Uint8Array) => () => decodeFrame(bytes);

  it("a binary of 1 MiB passes, one byte more is bad_frame", () => {
    expect((decodeFrame(encodeFrame(new Uint8Array(1 * MiB))) as Uint8Array).byteLength).toBe(1 * MiB);
    expect(bad(encodeFrame(new Uint8Array(1 * MiB + 1)))).toThrow(SessionmuxError);
  });

  it("a string of 64 KiB passes, one byte more is bad_frame", () => {
    expect(decodeFrame(encodeFrame("a".repeat(64 * KiB)))).toHaveLength(64 * KiB);
    expect(bad(encodeFrame("a".repeat(64 * KiB + 1)))).toThrow(SessionmuxError);
  });

  // an array of 10,000 or a map of 1,000 holds more values than a frame may by default
  const manyValues = { maxValues: 100_000 };

  it("an array of 10,000 elements passes, 10,001 is bad_frame", () => {
    expect(decodeFrame(encodeFrame(new Array(10_000).fill(1)), manyValues)).toHaveLength(10_000);
    expect(() => decodeFrame(encodeFrame(new Array(10_001).fill(1)), manyValues)).toThrow(SessionmuxError);
  });

  it("a map of 1,000 entries passes, 1,001 is bad_frame", () => {
    const map = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));
    expect(Object.keys(decodeFrame(encodeFrame(map(1_000)), manyValues) as object)).toHaveLength(1_000);
    expect(() => decodeFrame(encodeFrame(map(1_001)), manyValues)).toThrow(SessionmuxError);
  });

  it("4,096 values in all pass (the frame's own map and map keys count), 4,097 are bad_frame", () => {
    expect(Limits.maxValues).toBe(4_096); // "more than 4,096 values in all"
    // {a: [n items]}: 3 + n values
    const frame = (n: number) => encodeFrame({ a: new Array(n).fill(1) });
    expect((decodeFrame(frame(4_093)) as { a: unknown[] }).a).toHaveLength(4_093);
    expect(bad(frame(4_094))).toThrow(SessionmuxError);
  });

  it("32 nested arrays pass, 33 are bad_frame", () => {
    const nested = (depth: number) => Uint8Array.from([...new Array(depth).fill(0x91), 0xc0]);
    let value = decodeFrame(nested(32));
    for (let level = 0; level < 32; level++) value = (value as unknown[])[0];
    expect(value).toBeNull();
    expect(bad(nested(33))).toThrow(SessionmuxError);
  });
});
