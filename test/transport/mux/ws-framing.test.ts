import { once } from "node:events";
import { createRequire } from "node:module";
import { connect, createServer, type Server, type Socket } from "node:net";
import type { Writable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import * as wsModule from "ws";
import {
  binaryMessage,
  binaryMessageHeader,
  binaryMessageStart,
  bytesTakenByKernel,
} from "../../../src/transport/mux/ws-framing.js";
import { until } from "../../support/until.js";

const { Receiver } = wsModule as unknown as {
  Receiver: new (options: { isServer: boolean; maxPayload: number }) => Writable;
};

let server: Server | undefined;
const sockets: Socket[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
  server?.close();
});

/** A TCP connection on 127.0.0.1 whose reading end is paused: what the writer sends stays unread. */
async function pausedPair(): Promise<{ reader: Socket; writer: Socket }> {
  server = createServer((socket) => sockets.push(socket));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  const reader = connect(port, "127.0.0.1");
  sockets.push(reader);
  reader.pause();
  await once(reader, "connect");
  const writer = await until(() => sockets[1], 5_000, "accepted socket");
  return { reader, writer };
}

describe("what the mux uses beyond the documented surface of ws and Node", () => {
  it("is checked against ws 8 (a new major must be checked again)", () => {
    const version = createRequire(import.meta.url)("ws/package.json").version as string;
    expect(version.split(".")[0]).toBe("8");
  });

  it("the headers the mux writes make messages ws's own receiver reads, for every length encoding", () => {
    for (const length of [0, 125, 126, 65_535, 65_536, 300_000]) {
      const payload = new Uint8Array(length).fill(length % 251);
      const head = Uint8Array.of(0x83, 7);
      const whole = Buffer.concat([head, payload]);
      const receiver = new Receiver({ isServer: false, maxPayload: 0 });
      const got: Buffer[] = [];
      receiver.on("message", (data: Buffer, isBinary: boolean) => {
        expect(isBinary).toBe(true);
        got.push(data);
      });
      receiver.write(Buffer.concat([binaryMessageHeader(payload), payload]));
      receiver.write(binaryMessage(head, payload));
      receiver.write(Buffer.concat([binaryMessageStart(head, payload.length), payload]));
      expect(got).toHaveLength(3);
      expect(Buffer.compare(got[0]!, Buffer.from(payload))).toBe(0);
      expect(Buffer.compare(got[1]!, whole)).toBe(0);
      expect(Buffer.compare(got[2]!, whole)).toBe(0);
    }
  });

  it("the kernel's progress through one large write is visible before the write completes", async () => {
    const { reader, writer } = await pausedPair();
    // One write far larger than the kernel's buffers: it cannot complete while the peer is paused.
    writer.write(Buffer.alloc(64 * 1024 * 1024));
    const stuck = await until(
      () => {
        const taken = bytesTakenByKernel(writer);
        return taken > 0 ? taken : undefined;
      },
      5_000,
      "kernel takes the first bytes",
    );
    expect(writer.writableLength).toBeGreaterThan(0);
    let read = 0;
    reader.on("data", (chunk: Buffer) => {
      read += chunk.length;
      if (read > 8 * 1024 * 1024) reader.pause();
    });
    reader.resume();
    await until(() => bytesTakenByKernel(writer) > stuck, 10_000, "progress while the write is incomplete");
    expect(writer.writableLength).toBeGreaterThan(0);
  });

  it("a socket destroyed behind an unfinished write (its handle gone) is answered from Node's public counters", async () => {
    const { writer } = await pausedPair();
    const size = 64 * 1024 * 1024;
    writer.write(Buffer.alloc(size));
    await until(() => bytesTakenByKernel(writer) > 0, 5_000, "kernel takes the first bytes");
    writer.destroy();
    // the unfinished write is still counted as unsent until 'close'
    expect(writer.writableLength).toBeGreaterThan(0);
    const taken = bytesTakenByKernel(writer);
    expect(taken).toBe(writer.bytesWritten - writer.writableLength);
    expect(taken).toBeGreaterThanOrEqual(0);
    expect(taken).toBeLessThanOrEqual(size);
  });
});
