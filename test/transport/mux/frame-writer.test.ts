import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { decodeFrame } from "../../../protocol/codec.js";
import { HostMetrics } from "../../../src/transport/metrics.js";
import { FrameWriter } from "../../../src/transport/mux/frame-writer.js";
import { sharedEventFrames } from "../../../src/transport/mux/shared-event-frames.js";
import { binaryMessage } from "../../../src/transport/mux/ws-framing.js";
import { gate } from "../../support/gate.js";
import { settledHeldBytes } from "../../support/held-bytes.js";

/**
 * One mux socket's writer between a real `ws` server socket and a real `ws` client on
 * 127.0.0.1: what the client receives, in which order, and what the writer holds meanwhile.
 */

const HIGH_WATER = 64 * 1024;
const MIB = 1024 * 1024;
const text = (value: string) => new TextEncoder().encode(value);
const bytes = (length: number, fill: number) => new Uint8Array(length).fill(fill);
const EMPTY = new Uint8Array(0);

let disposers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const dispose of disposers.reverse()) await dispose();
  disposers = [];
});

interface Received {
  data: Buffer;
  binary: boolean;
}

async function writerPair(options: { metrics?: HostMetrics; highWaterBytes?: number } = {}) {
  const server: Server = createServer();
  const wss = new WebSocketServer({ noServer: true });
  const accepted = new Promise<{ ws: WebSocket; socket: Socket }>((resolve) => {
    server.on("upgrade", (req, socket, head) =>
      wss.handleUpgrade(req, socket, head, (ws) => resolve({ ws, socket: socket as Socket })),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const client = new WebSocket(`ws://127.0.0.1:${port}`);
  const received: Received[] = [];
  client.on("message", (data, isBinary) => received.push({ data: data as Buffer, binary: isBinary }));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    client.on("close", (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  await new Promise<void>((resolve, reject) => {
    client.once("open", resolve);
    client.once("error", reject);
  });
  const { ws, socket } = await accepted;
  const writer = new FrameWriter(ws, socket, options.metrics, options.highWaterBytes ?? HIGH_WATER);
  disposers.push(async () => {
    client.terminate();
    ws.terminate();
    wss.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const texts = () => received.map(({ data }) => data.toString());
  // every message the mux sends is binary, whichever way it went out
  const arrived = async (count: number) => {
    await vi.waitFor(() => expect(received.length).toBeGreaterThanOrEqual(count), { timeout: 5_000 });
    expect(received.filter(({ binary }) => !binary)).toEqual([]);
  };
  /** The client stops reading: what the writer sends piles up in the kernel, then in the socket. */
  const stopReading = () => (client as unknown as { _socket: Socket })._socket.pause();
  const readAgain = () => (client as unknown as { _socket: Socket })._socket.resume();
  return { writer, ws, socket, client, received, texts, arrived, closed, stopReading, readAgain };
}

/** Fills the socket's backlog past what the kernel takes while the client does not read. */
async function backlog(pair: Awaited<ReturnType<typeof writerPair>>, atLeast: number) {
  pair.stopReading();
  const chunk = bytes(256 * 1024, 1);
  for (let i = 0; i < 400 && pair.socket.writableLength < atLeast; i++) {
    pair.writer.send(chunk);
    await sleep(2);
  }
  expect(pair.socket.writableLength).toBeGreaterThanOrEqual(atLeast);
}

/** What the writer counted: [frames, bytes]. */
/**
 * A drain waiter that asks again as soon as it is answered, as the connection does while calls
 * wait; bounded (1,000 answers), so answers on every tick end instead of keeping the event loop
 * from turning for ever.
 */
function askingAgain(writer: FrameWriter) {
  let answers = 0;
  const again = () => {
    if (++answers < 1000) writer.onDrain(again);
  };
  writer.onDrain(again);
  return { answers: () => answers, cancel: () => writer.cancelDrain(again) };
}

async function counted(metrics: HostMetrics): Promise<[number, number]> {
  return [
    (await metrics.framesOut.get()).values[0]?.value ?? 0,
    (await metrics.bytesOut.get()).values[0]?.value ?? 0,
  ];
}

/** The socket's writes, as they were handed to it. */
function writesOf(socket: Socket): unknown[] {
  const writes: unknown[] = [];
  const write = socket.write.bind(socket);
  vi.spyOn(socket, "write").mockImplementation(((chunk: unknown, ...rest: never[]) => {
    writes.push(chunk);
    return write(chunk as Buffer, ...rest);
  }) as typeof socket.write);
  return writes;
}

/** A body of one chunk, read only once the test opens `held`. */
function heldChunk(chunk: Uint8Array) {
  const held = gate();
  async function* body() {
    await held.promise;
    yield chunk;
  }
  return { held, body };
}

async function* chunksOf(parts: readonly Uint8Array[], read?: (index: number) => void) {
  for (let i = 0; i < parts.length; i++) {
    read?.(i);
    yield parts[i]!;
  }
}

describe("FrameWriter", () => {
  it("sends each message whole and in order: small and large bodies behind their heads, a ready message as it is, frames encoded", async () => {
    const pair = await writerPair();
    const large = bytes(4096, 7);
    pair.writer.sendParts(text("head:"), text("small body"));
    pair.writer.sendParts(text("big:"), large);
    // a message framed once for many sockets is written as it is, not framed again from its parts
    pair.writer.sendParts(text("ignored "), text("parts"), binaryMessage(text("as "), text("framed")));
    pair.writer.send(text("plain"));
    pair.writer.sendFrame({ type: "pong", t: 5 } as never);
    await pair.arrived(5);
    const [small, big, ready, plain, frame] = pair.received.map(({ data }) => data);
    expect(small!.toString()).toBe("head:small body");
    expect(big!.subarray(0, 4).toString()).toBe("big:");
    expect(Buffer.compare(big!.subarray(4), Buffer.from(large))).toBe(0);
    expect(ready!.toString()).toBe("as framed");
    expect(plain!.toString()).toBe("plain");
    expect(decodeFrame(frame!)).toEqual({ type: "pong", t: 5 });
  });

  it("copies a body of up to 512 bytes in behind its header, writes a larger one as it is, and shared frames as built", async () => {
    const pair = await writerPair();
    const writes = writesOf(pair.socket);
    const small = bytes(512, 3);
    pair.writer.sendParts(text("h"), small);
    // a small message waits for the tick's others, and goes before anything else is written
    expect(writes).toHaveLength(0);
    const large = bytes(513, 4);
    pair.writer.sendParts(text("h"), large);
    expect(
      Buffer.from(writes[0] as Uint8Array)
        .subarray(-513)
        .equals(Buffer.concat([text("h"), small])),
    ).toBe(true);
    // a body many sockets share is never copied per socket
    expect(writes).toHaveLength(3);
    expect(writes[2]).toBe(large);
    const frames = sharedEventFrames([{ name: "n", value: 1 } as never, { name: "n", value: 2 } as never]);
    pair.writer.sendShared(frames);
    expect(writes).toHaveLength(4);
    expect(writes[3]).toBe(frames.wire);
    await pair.arrived(4);
    expect(pair.received[1]!.data.length).toBe(1 + 513);
  });

  it("writes a tick's small messages as one write at its end, counted in buffered until then, in order", async () => {
    const pair = await writerPair();
    const writes = writesOf(pair.socket);
    for (let i = 0; i < 100; i++) pair.writer.send(text(`m${i}`));
    expect(writes).toHaveLength(0);
    expect(pair.writer.buffered).toBe(100 * 2 + 10 * 2 + 90 * 3);
    await new Promise((resolve) => process.nextTick(resolve));
    expect(writes).toHaveLength(1);
    await pair.arrived(100);
    expect(pair.texts()).toEqual(Array.from({ length: 100 }, (_, i) => `m${i}`));
  });

  it("a backlog of tiny messages weighs about its bytes, not a write's own cost for each", async () => {
    // Each write a socket holds costs over 100 bytes besides its data: written one by one, the
    // 16-byte answers of a peer's `close` frames weighed ten times the backlog counted.
    const pair = await writerPair();
    pair.stopReading();
    const before = await settledHeldBytes();
    for (let id = 1; pair.writer.buffered < 8 * MIB; ) {
      for (let i = 0; i < 4096; i++) pair.writer.sendFrame({ type: "end", id: id++ });
      await new Promise((resolve) => setImmediate(resolve));
    }
    const held = (await settledHeldBytes()) - before;
    expect(held).toBeLessThan(2 * pair.writer.buffered);
  });

  it("answers every drain waiter of a tick with one empty write behind what was written", async () => {
    const pair = await writerPair();
    const writes = writesOf(pair.socket);
    pair.writer.send(text("x"));
    let woken = 0;
    pair.writer.onDrain(() => woken++);
    pair.writer.onDrain(() => woken++);
    expect(writes).toHaveLength(2);
    expect((writes[1] as Uint8Array).length).toBe(0);
    await vi.waitFor(() => expect(woken).toBe(2));
  });

  it("corks the socket for the rest of the tick at the first message, and counts the tick's frames and bytes once", async () => {
    const metrics = new HostMetrics();
    const pair = await writerPair({ metrics });
    const inc = vi.spyOn(metrics.framesOut, "inc");
    const shared = sharedEventFrames([{ name: "n", value: 1 } as never, { name: "n", value: 2 } as never]);
    expect(pair.socket.writableCorked).toBe(0);
    pair.writer.sendParts(text("ab"), text("cde"));
    expect(pair.socket.writableCorked).toBe(1);
    pair.writer.send(text("fgh"));
    pair.writer.sendShared(shared);
    expect(pair.socket.writableCorked).toBe(1);
    // nothing reaches the kernel before the tick ends
    expect(pair.socket.writableLength).toBeGreaterThan(0);
    await new Promise((resolve) => process.nextTick(resolve));
    expect(pair.socket.writableCorked).toBe(0);
    expect(inc).toHaveBeenCalledTimes(1);
    expect(await counted(metrics)).toEqual([4, 5 + 3 + shared.payloadBytes]);
    await pair.arrived(4);
    // a tick that sent nothing counts nothing
    await new Promise((resolve) => process.nextTick(resolve));
    expect(inc).toHaveBeenCalledTimes(1);
  });

  it("a tick's shared event frames arrive as one message each", async () => {
    const pair = await writerPair();
    const list = [
      { name: "session.event", value: { seq: 1 } },
      { name: "session.event", value: { seq: 2 } },
    ] as never[];
    pair.writer.sendShared(sharedEventFrames(list));
    await pair.arrived(2);
    expect(pair.received.map(({ data }) => decodeFrame(data))).toEqual([
      { type: "event", name: "session.event", value: { seq: 1 } },
      { type: "event", name: "session.event", value: { seq: 2 } },
    ]);
  });

  it("while ws holds a message of its own, sends through ws, so messages keep their order", async () => {
    const pair = await writerPair();
    expect(pair.writer.framesBesideWs).toBe(true);
    // ws reads a Blob before sending it: until then the message is ws's own, not the socket's
    pair.ws.send(new Blob([text("first, from ws")]));
    expect(pair.writer.framesBesideWs).toBe(false);
    pair.writer.sendParts(text("second: "), text("parts"));
    pair.writer.sendParts(text("third: "), bytes(1024, 66));
    pair.writer.sendParts(text("ignored"), text("ignored"), binaryMessage(EMPTY, text("fourth, ready")));
    pair.writer.sendShared(sharedEventFrames([{ name: "fifth", value: 5 } as never]));
    pair.writer.send(text("sixth, no head"));
    await pair.arrived(6);
    const [first, second, third, fourth, fifth, sixth] = pair.received.map(({ data }) => data);
    expect(sixth!.toString()).toBe("sixth, no head");
    expect(first!.toString()).toBe("first, from ws");
    expect(second!.toString()).toBe("second: parts");
    expect(third!.subarray(0, 7).toString()).toBe("third: ");
    expect(third!.length).toBe(7 + 1024);
    // through ws a ready message is sent from its parts
    expect(fourth!.toString()).toBe("ignoredignored");
    expect(decodeFrame(fifth!)).toEqual({ type: "event", name: "fifth", value: 5 });
    expect(pair.writer.framesBesideWs).toBe(true);
  });

  it("a closed socket is sent nothing, counts nothing, streams nothing and reads no chunk; a drain waiter is answered", async () => {
    const metrics = new HostMetrics();
    const pair = await writerPair({ metrics });
    pair.client.close();
    await pair.closed;
    await vi.waitFor(() => expect(pair.writer.open).toBe(false));
    expect(pair.writer.framesBesideWs).toBe(false);
    const before = pair.socket.writableLength;
    pair.writer.sendParts(text("a"), text("b"));
    pair.writer.sendShared(sharedEventFrames([{ name: "n", value: 1 } as never]));
    let read = 0;
    await pair.writer.sendStreamed(text("h"), 3, () => chunksOf([text("abc")], () => read++));
    expect(read).toBe(0);
    expect(pair.writer.buffered).toBe(0);
    expect(pair.socket.writableLength).toBe(before);
    await sleep(5);
    expect(await counted(metrics)).toEqual([0, 0]);
    let woken = 0;
    pair.writer.onDrain(() => woken++);
    await vi.waitFor(() => expect(woken).toBe(1));
  });
});

describe("FrameWriter: streamed messages", () => {
  it("a streamed message arrives whole; what is sent meanwhile waits, counted in buffered, and follows in order", async () => {
    const pair = await writerPair();
    const secondChunk = gate();
    async function* body() {
      yield text("part one, ");
      await secondChunk.promise;
      yield text("part two");
    }
    const sent = pair.writer.sendStreamed(text("streamed: "), 18, body);
    let settled = false;
    void sent.then(() => {
      settled = true;
    });
    await sleep(20);
    expect(pair.writer.framesBesideWs).toBe(false);
    pair.writer.sendParts(text("after: "), text("parts"));
    const shared = sharedEventFrames([{ name: "after", value: "shared" } as never]);
    pair.writer.sendShared(shared);
    // the unsent part of the body and the held messages are what the socket still owes
    expect(pair.writer.buffered).toBe(pair.ws.bufferedAmount + 8 + 12 + shared.wire.length);
    expect(pair.received).toEqual([]);
    expect(settled).toBe(false);
    secondChunk.open();
    await sent;
    await pair.arrived(3);
    expect(pair.received[0]!.data.toString()).toBe("streamed: part one, part two");
    expect(pair.received[1]!.data.toString()).toBe("after: parts");
    expect(decodeFrame(pair.received[2]!.data)).toEqual({ type: "event", name: "after", value: "shared" });
    await vi.waitFor(() => expect(pair.writer.buffered).toBe(0));
    expect(pair.writer.framesBesideWs).toBe(true);
  });

  it("a second streamed message waits for the first, and what was sent between them keeps its place", async () => {
    const pair = await writerPair();
    const { held, body: slow } = heldChunk(text("one"));
    const first = pair.writer.sendStreamed(text("1:"), 3, slow);
    pair.writer.send(text("between"));
    let secondRead = false;
    const second = pair.writer.sendStreamed(text("2:"), 3, () =>
      chunksOf([text("two")], () => {
        secondRead = true;
      }),
    );
    pair.writer.send(text("last"));
    await sleep(20);
    expect(secondRead).toBe(false);
    held.open();
    await Promise.all([first, second]);
    await pair.arrived(4);
    expect(pair.texts()).toEqual(["1:one", "between", "2:two", "last"]);
  });

  it("a streamed message counts as one frame of all its bytes", async () => {
    const metrics = new HostMetrics();
    const pair = await writerPair({ metrics });
    await pair.writer.sendStreamed(text("head"), 6, () => chunksOf([text("abc"), text("def")]));
    await pair.arrived(1);
    expect(await counted(metrics)).toEqual([1, 10]);
  });

  it("a body whose reader cannot be ended early is read to its end, and the socket stays open", async () => {
    const pair = await writerPair();
    const parts = [text("ab"), text("cd")];
    let at = 0;
    const plain = (): AsyncIterable<Uint8Array> => ({
      [Symbol.asyncIterator]: () => ({
        next: async () =>
          at < parts.length ? { done: false, value: parts[at++]! } : { done: true, value: undefined },
      }),
    });
    await pair.writer.sendStreamed(text("h:"), 4, plain);
    pair.writer.send(text("next"));
    await pair.arrived(2);
    expect(pair.texts()).toEqual(["h:abcd", "next"]);
    expect(pair.writer.open).toBe(true);
  });

  it("a socket closed while a chunk is read sends nothing of it and owes nothing after", async () => {
    const metrics = new HostMetrics();
    const pair = await writerPair({ metrics });
    const { held: reading, body } = heldChunk(bytes(4096, 5));
    const sent = pair.writer.sendStreamed(text("h"), 4096, body);
    await sleep(20);
    pair.ws.terminate();
    await vi.waitFor(() => expect(pair.writer.open).toBe(false));
    reading.open();
    await sent;
    expect(pair.writer.buffered).toBe(0);
    await sleep(5);
    // the head only
    expect(await counted(metrics)).toEqual([0, 1]);
  });

  it("a streamed message whose turn comes after the socket closed sends nothing, and the socket owes nothing", async () => {
    const pair = await writerPair();
    const { held, body } = heldChunk(text("one"));
    const first = pair.writer.sendStreamed(text("1:"), 3, body);
    const second = pair.writer.sendStreamed(text("2:"), 3, () => chunksOf([text("two")]));
    await sleep(20);
    pair.ws.terminate();
    await vi.waitFor(() => expect(pair.writer.open).toBe(false));
    held.open();
    await Promise.all([first, second]);
    // `ws` counts what it is handed after the close as buffered, for good
    expect(pair.ws.bufferedAmount).toBe(0);
    expect(pair.writer.buffered).toBe(0);
  });

  it("with a high-water mark of 0, a socket with no backlog is sent the whole body", async () => {
    const pair = await writerPair({ highWaterBytes: 0 });
    await pair.writer.sendStreamed(text("h:"), 6, () => chunksOf([text("abc"), text("def")]));
    await pair.arrived(1);
    expect(pair.texts()).toEqual(["h:abcdef"]);
  });

  it("an empty body is the head alone", async () => {
    const pair = await writerPair();
    let read = 0;
    await pair.writer.sendStreamed(text("only the head"), 0, () => chunksOf([], () => read++));
    pair.writer.send(text("next"));
    await pair.arrived(2);
    expect(pair.texts()).toEqual(["only the head", "next"]);
    expect(read).toBe(0);
  });

  for (const [label, parts] of [
    ["ends short", [text("abc")]],
    ["runs long", [text("abc"), text("defgh")]],
  ] as const) {
    it(`a body that ${label} of its announced size closes the socket with 1011, and the stream settles`, async () => {
      const pair = await writerPair();
      await pair.writer.sendStreamed(text("h:"), 6, () => chunksOf(parts));
      expect(await pair.closed).toEqual({
        code: 1011,
        reason: "an answer could not be completed; retry the call",
      });
      expect(pair.writer.buffered).toBe(0);
    });
  }

  it("a body that fails closes the socket with 1011, and its reader is ended", async () => {
    const pair = await writerPair();
    let ended = false;
    const failing = (): AsyncIterable<Uint8Array> => ({
      [Symbol.asyncIterator]: () => ({
        next: async () => {
          throw new Error("the file went away");
        },
        return: async () => {
          ended = true;
          return { done: true, value: undefined };
        },
      }),
    });
    await pair.writer.sendStreamed(text("h:"), 6, failing);
    expect((await pair.closed).code).toBe(1011);
    expect(ended).toBe(true);
  });

  it("reads the next chunk only once the backlog is at most the high-water mark: a peer that stops reading holds one chunk", async () => {
    const pair = await writerPair({ highWaterBytes: HIGH_WATER });
    await backlog(pair, 2 * HIGH_WATER);
    const idle = [pair.socket.listenerCount("drain"), pair.socket.listenerCount("close")];
    const chunk = bytes(HIGH_WATER, 9);
    const count = 32;
    let read = 0;
    const backlogs: number[] = [];
    const sent = pair.writer.sendStreamed(text("h"), chunk.length * count, () =>
      chunksOf(
        Array.from({ length: count }, () => chunk),
        () => {
          read++;
          backlogs.push(pair.ws.bufferedAmount);
        },
      ),
    );
    await sleep(100);
    // the backlog was past the mark: no chunk was read
    expect(read).toBe(0);
    pair.readAgain();
    await sent;
    expect(read).toBe(count);
    for (const at of backlogs) expect(at).toBeLessThanOrEqual(HIGH_WATER);
    // the waits for the backlog leave no listener on the socket
    expect(pair.socket.listenerCount("drain")).toBe(idle[0]);
    expect(pair.socket.listenerCount("close")).toBe(idle[1]);
  });

  it("a socket closed while the stream waits for its backlog reads nothing more and settles", async () => {
    const pair = await writerPair();
    await backlog(pair, 2 * HIGH_WATER);
    let read = 0;
    const sent = pair.writer.sendStreamed(text("h"), 10, () => chunksOf([bytes(10, 1)], () => read++));
    await sleep(20);
    pair.ws.terminate();
    await sent;
    expect(read).toBe(0);
  });
});

describe("FrameWriter: drain", () => {
  it("wakes a waiter once when nothing is owed; a cancelled one never", async () => {
    const pair = await writerPair();
    const woken: string[] = [];
    const a = () => woken.push("a");
    const b = () => woken.push("b");
    pair.writer.onDrain(a);
    pair.writer.onDrain(b);
    pair.writer.cancelDrain(b);
    expect(woken).toEqual([]);
    await vi.waitFor(() => expect(woken).toEqual(["a"]));
    await sleep(20);
    expect(woken).toEqual(["a"]);
  });

  it("wakes a waiter that asked in a tick whose messages wait in the cork once they left", async () => {
    const pair = await writerPair();
    pair.writer.send(text("small"));
    expect(pair.writer.buffered).toBeGreaterThan(0);
    let woken = 0;
    pair.writer.onDrain(() => woken++);
    await vi.waitFor(() => expect(woken).toBe(1), { timeout: 2_000 });
    await pair.arrived(1);
  });

  it("wakes a waiter once the socket's backlog went to the kernel", async () => {
    const pair = await writerPair();
    await backlog(pair, 2 * HIGH_WATER);
    let woken = 0;
    pair.writer.onDrain(() => woken++);
    await sleep(50);
    expect(woken).toBe(0);
    expect(pair.writer.buffered).toBe(pair.socket.writableLength);
    const before = pair.writer.dispatched;
    pair.readAgain();
    await vi.waitFor(() => expect(woken).toBe(1), { timeout: 5_000 });
    expect(pair.writer.dispatched).toBeGreaterThan(before);
  });

  it("a socket that takes no more writes answers a waiter once it has closed, not tick after tick: one that asks again at once leaves the event loop turning", async () => {
    const pair = await writerPair();
    pair.socket.destroy();
    expect(pair.socket.writable).toBe(false);
    const waiter = askingAgain(pair.writer);
    const beforeTheLoopTurned = await new Promise<number>((resolve) =>
      setImmediate(() => resolve(waiter.answers())),
    );
    expect(beforeTheLoopTurned).toBeLessThanOrEqual(1);
    await vi.waitFor(() => expect(waiter.answers()).toBeGreaterThan(0));
    waiter.cancel();
  });

  it("a socket ended behind a backlog answers a waiter once it has closed, not turn after turn while the backlog waits", async () => {
    const pair = await writerPair();
    await backlog(pair, 2 * HIGH_WATER);
    pair.socket.end();
    expect(pair.socket.writable).toBe(false);
    const waiter = askingAgain(pair.writer);
    await sleep(50);
    expect(waiter.answers()).toBe(0);
    // the client reads again: the backlog leaves, both ends close
    pair.readAgain();
    await vi.waitFor(() => expect(waiter.answers()).toBeGreaterThan(0), { timeout: 5_000 });
    waiter.cancel();
  });

  it("a waiter that asked while a message streamed is answered when it ends, even with nothing left to drain", async () => {
    const pair = await writerPair();
    const { held, body } = heldChunk(text("x"));
    const sent = pair.writer.sendStreamed(text("h"), 1, body);
    let woken = 0;
    pair.writer.onDrain(() => woken++);
    await sleep(20);
    expect(woken).toBe(0);
    held.open();
    await sent;
    await vi.waitFor(() => expect(woken).toBe(1));
  });
});
