import { Encoder, type Packet, PacketType } from "socket.io-parser";
import { describe, expect, it } from "vitest";
import { cachingParser } from "../../bench/harness/socketio-decode-cache.js";

const encoded = (packet: Packet): string => {
  const [text] = new Encoder().encode(packet);
  return text as string;
};

const decodedBy = (decoder: InstanceType<typeof cachingParser.Decoder>, data: string): Packet[] => {
  const seen: Packet[] = [];
  decoder.on("decoded", (packet: Packet) => seen.push(packet));
  decoder.add(data);
  return seen;
};

describe("the follower fleet's Socket.IO parser", () => {
  it("parses an event text once and hands every client the same packet", () => {
    const text = encoded({ type: PacketType.EVENT, nsp: "/", data: ["events", 1, [{ seq: 1 }]] });
    const [first] = decodedBy(new cachingParser.Decoder(), text);
    const [second] = decodedBy(new cachingParser.Decoder(), text);
    expect(first).toEqual({ type: PacketType.EVENT, nsp: "/", data: ["events", 1, [{ seq: 1 }]] });
    expect(second).toBe(first);
  });

  it("parses different texts apart, and never keeps a packet that is not a plain event", () => {
    const one = encoded({ type: PacketType.EVENT, nsp: "/", data: ["events", 1, [{ seq: 1 }]] });
    const two = encoded({ type: PacketType.EVENT, nsp: "/", data: ["events", 1, [{ seq: 2 }]] });
    expect(decodedBy(new cachingParser.Decoder(), two)[0]).not.toEqual(
      decodedBy(new cachingParser.Decoder(), one)[0],
    );
    const connect = encoded({ type: PacketType.CONNECT, nsp: "/", data: { sid: "a" } });
    const [a] = decodedBy(new cachingParser.Decoder(), connect);
    const [b] = decodedBy(new cachingParser.Decoder(), connect);
    expect(b).toEqual(a);
    expect(b).not.toBe(a);
  });
});
