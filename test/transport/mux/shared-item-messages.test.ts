import type { Writable } from "node:stream";
import { describe, expect, test } from "vitest";
import * as wsModule from "ws";
import { decodeFrame, encodeFrame } from "../../../protocol/codec.js";
import { itemFramePrefix } from "../../../src/transport/mux/item-frame.js";
import { sharedItemMessage } from "../../../src/transport/mux/shared-item-messages.js";

/** `ws`'s own frame parser, as a client uses it (`@types/ws` does not declare it). */
const { Receiver } = wsModule as unknown as {
  Receiver: new (options: { isServer: boolean; maxPayload: number }) => Writable;
};

function parse(wire: Buffer): unknown[] {
  const receiver = new Receiver({ isServer: false, maxPayload: 0 });
  const messages: unknown[] = [];
  receiver.on("message", (data: Buffer) => messages.push(decodeFrame(data, { maxStrBytes: 1024 * 1024 })));
  receiver.on("error", (err: Error) => {
    throw err;
  });
  receiver.write(wire);
  return messages;
}

const eventsValue = (text: string) =>
  encodeFrame({ kind: "events", events: [{ seq: 1, at: 5, type: "assistant/delta", data: { text } }] });

const itemOf = (id: number, text: string) => ({
  type: "item",
  id,
  value: { kind: "events", events: [{ seq: 1, at: 5, type: "assistant/delta", data: { text } }] },
});

describe("item messages framed once for every socket sending the same value", () => {
  test("the message is the item frame of its stream, for every length encoding", () => {
    for (const length of [1, 200, 70_000]) {
      const value = eventsValue("x".repeat(length));
      const message = sharedItemMessage(3, itemFramePrefix(3), value);
      expect(message).toBeDefined();
      expect(parse(message!)).toEqual([itemOf(3, "x".repeat(length))]);
    }
  });

  test("sockets under the same stream id get the same bytes; another id gets its own message", () => {
    const value = eventsValue("shared");
    const first = sharedItemMessage(1, itemFramePrefix(1), value);
    expect(sharedItemMessage(1, itemFramePrefix(1), value)).toBe(first);
    const other = sharedItemMessage(2, itemFramePrefix(2), value);
    expect(other).not.toBe(first);
    expect(parse(other!)).toEqual([itemOf(2, "shared")]);
    expect(parse(first!)).toEqual([itemOf(1, "shared")]);
  });

  test("an equal value that is another array is framed apart: bytes are kept by identity", () => {
    const a = eventsValue("same");
    const b = eventsValue("same");
    expect(sharedItemMessage(1, itemFramePrefix(1), b)).not.toBe(sharedItemMessage(1, itemFramePrefix(1), a));
  });

  test("past the ids kept per value, a small value is framed per socket and a large one not copied", () => {
    const small = eventsValue("s");
    const large = eventsValue("l".repeat(4096));
    for (let id = 1; id <= 4; id++) {
      sharedItemMessage(id, itemFramePrefix(id), small);
      sharedItemMessage(id, itemFramePrefix(id), large);
    }
    const fifth = sharedItemMessage(5, itemFramePrefix(5), small);
    expect(parse(fifth!)).toEqual([itemOf(5, "s")]);
    expect(sharedItemMessage(5, itemFramePrefix(5), small)).not.toBe(fifth);
    expect(sharedItemMessage(5, itemFramePrefix(5), large)).toBeUndefined();
    // the kept ones are still served
    expect(parse(sharedItemMessage(4, itemFramePrefix(4), large)!)).toEqual([itemOf(4, "l".repeat(4096))]);
  });

  test("past the ids kept per value, one of 512 bytes is still framed per socket, one of 513 is not", () => {
    // text lengths giving values of exactly 512 and 513 bytes (str16 text: one byte of value per char)
    const base = eventsValue("b".repeat(300)).length - 300;
    const atLimit = eventsValue("b".repeat(512 - base));
    const pastLimit = eventsValue("c".repeat(513 - base));
    expect([atLimit.length, pastLimit.length]).toEqual([512, 513]);
    for (let id = 1; id <= 4; id++) {
      sharedItemMessage(id, itemFramePrefix(id), atLimit);
      sharedItemMessage(id, itemFramePrefix(id), pastLimit);
    }
    expect(parse(sharedItemMessage(9, itemFramePrefix(9), atLimit)!)).toEqual([
      itemOf(9, "b".repeat(512 - base)),
    ]);
    expect(sharedItemMessage(9, itemFramePrefix(9), pastLimit)).toBeUndefined();
  });
});
