import type { Writable } from "node:stream";
import { describe, expect, test } from "vitest";
import * as wsModule from "ws";
import { decodeFrame } from "../../../protocol/codec.js";
import type { Notification } from "../../../protocol/index.js";
import { sharedEventFrames } from "../../../src/transport/mux/shared-event-frames.js";

/** `ws`'s own frame parser, as a client uses it (`@types/ws` does not declare it). */
const { Receiver } = wsModule as unknown as {
  Receiver: new (options: { isServer: boolean; maxPayload: number }) => Writable;
};

function parse(wire: Buffer): unknown[] {
  const receiver = new Receiver({ isServer: false, maxPayload: 0 });
  const messages: unknown[] = [];
  receiver.on("message", (data: Buffer, isBinary: boolean) => {
    expect(isBinary).toBe(true);
    messages.push(decodeFrame(data, { maxStrBytes: 1024 * 1024 }));
  });
  receiver.on("error", (err: Error) => {
    throw err;
  });
  receiver.write(wire);
  return messages;
}

const failure = (length: number): Notification => ({
  name: "agent.error",
  value: { sessionId: `s${length}`, message: "m".repeat(length) },
});

describe("event frames built once for many sockets (protocol-v1 §6)", () => {
  test("the wire bytes are the event frames as WebSocket messages, for every length encoding", () => {
    // 7-bit, 16-bit and 64-bit payload lengths (RFC 6455 §5.2)
    const list = Object.freeze([failure(10), failure(300), failure(70_000)]);
    const frames = sharedEventFrames(list);
    expect(frames.payloads.map((p) => decodeFrame(p, { maxStrBytes: 1024 * 1024 }))).toEqual(
      list.map((n) => ({ type: "event", name: n.name, value: n.value })),
    );
    expect(parse(frames.wire)).toEqual(list.map((n) => ({ type: "event", name: n.name, value: n.value })));
    expect(frames.payloadBytes).toBe(frames.payloads.reduce((sum, p) => sum + p.length, 0));
  });

  test("the same list is encoded once; another list gets its own frames", () => {
    const list = Object.freeze([failure(1)]);
    const other = Object.freeze([failure(1)]);
    expect(sharedEventFrames(list)).toBe(sharedEventFrames(list));
    expect(sharedEventFrames(other)).not.toBe(sharedEventFrames(list));
    expect(sharedEventFrames(other).wire).toEqual(sharedEventFrames(list).wire);
  });

  test("one notification's wire is its own message, with the payload a view of it: nothing copied twice", () => {
    const frames = sharedEventFrames(Object.freeze([failure(20)]));
    const [payload] = frames.payloads;
    expect(frames.payloads).toHaveLength(1);
    expect(payload!.buffer).toBe(frames.wire.buffer);
    expect(payload!.byteOffset).toBe(frames.wire.byteOffset + frames.wire.length - payload!.length);
    expect(parse(frames.wire)).toEqual([{ type: "event", name: "agent.error", value: failure(20).value }]);
  });
});
