import { once } from "node:events";
import { createServer } from "node:http";
import { describe, expect, it } from "vitest";
import { MemorySocket } from "../../../src/transport/in-process/memory-socket.js";
import { until } from "../../support/until.js";

describe("MemorySocket, the in-process stand-in for a TCP connection", () => {
  it("holds writes back while the other end does not read, like a full TCP window, and delivers every byte in order", async () => {
    const [a, b] = MemorySocket.pair();
    b.pause();
    const chunk = Buffer.alloc(64 * 1024, 7);
    const accepted: boolean[] = [];
    for (let i = 0; i < 8; i++) accepted.push(a.write(chunk));
    const written = 8 * chunk.length;
    expect(accepted).toEqual(Array(8).fill(false));
    // the backlog stays with the writer: what the mux reads as a slow peer
    await until(() => a.writableLength > 0, 5_000, "a writer backlog");
    expect(a.bytesWritten).toBeLessThan(written);
    const received: Buffer[] = [];
    b.on("data", (data: Buffer) => received.push(data));
    b.resume();
    await once(a, "drain");
    a.end(Buffer.from("end"));
    await once(b, "end");
    const all = Buffer.concat(received);
    expect(all.subarray(-3).toString()).toBe("end");
    expect(all.length).toBe(a.bytesWritten);
    expect(all.subarray(0, -3).every((byte) => byte === 7)).toBe(true);
  });

  it("destroying one end closes the other", async () => {
    const [a, b] = MemorySocket.pair();
    const closed = once(b, "close");
    b.resume();
    a.destroy();
    await closed;
    expect(b.destroyed).toBe(true);
  });

  it("an end destroyed right after its last write: the other still reads every byte, then its end, then closes", async () => {
    const [a, b] = MemorySocket.pair();
    b.pause();
    // what a refused upgrade does: the answer, then the socket destroyed once it is written
    a.end(Buffer.from("HTTP/1.1 429"), () => a.destroy());
    await once(a, "close");
    expect(b.destroyed).toBe(false);
    const received: Buffer[] = [];
    b.on("data", (data: Buffer) => received.push(data));
    const closed = once(b, "close");
    b.resume();
    await once(b, "end");
    await closed;
    expect(Buffer.concat(received).toString()).toBe("HTTP/1.1 429");
  });

  it("an end destroyed while its write waits for the other reader: that write's bytes are read all the same", async () => {
    const [a, b] = MemorySocket.pair();
    b.pause();
    const big = Buffer.alloc(64 * 1024, 1);
    const written = new Promise<unknown>((resolve) => a.write(big, resolve));
    await until(() => a.writableLength > 0, 5_000, "a write waiting for the reader");
    a.destroy();
    // the write is over: its bytes are with the reader
    await written;
    const received: Buffer[] = [];
    b.on("data", (data: Buffer) => received.push(data));
    b.resume();
    await once(b, "end");
    expect(Buffer.concat(received)).toEqual(big);
  });

  it("a write to an end whose other end is gone fails, as a write to a closed TCP connection does", async () => {
    const [a, b] = MemorySocket.pair();
    b.pause();
    a.destroy();
    const failed = once(b, "error");
    b.write(Buffer.from("too late"));
    const [error] = (await failed) as [Error];
    expect(error.message).toBe("the other end of the in-process socket is closed");
  });

  it("a reader that asks before anything was written gets the bytes written later", async () => {
    const [a, b] = MemorySocket.pair();
    const received: Buffer[] = [];
    // rejects if the reader fails instead
    const ended = once(b, "end");
    // flowing at once: the reader asks for bytes while no write waits for it
    b.on("data", (data: Buffer) => received.push(data));
    await new Promise((resolve) => setImmediate(resolve));
    a.end(Buffer.from("later"));
    await ended;
    expect(Buffer.concat(received).toString()).toBe("later");
  });

  it("as the socket of a Node HTTP server, it names its peer in-process and answers a request", async () => {
    const server = createServer((req, res) => res.end(String(req.socket.remoteAddress)));
    // the settings `net.Socket` offers answer as it does, with the socket itself
    server.on("connection", (socket: MemorySocket) => {
      expect(socket.setNoDelay()).toBe(socket);
      expect(socket.setKeepAlive()).toBe(socket);
      expect(socket.setTimeout()).toBe(socket);
    });
    const [client, host] = MemorySocket.pair();
    server.emit("connection", host);
    let answer = "";
    client.on("data", (data: Buffer) => {
      answer += data.toString("latin1");
    });
    client.end("GET / HTTP/1.1\r\nHost: in-process\r\nConnection: close\r\n\r\n");
    await once(client, "end");
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.endsWith("\r\n\r\nin-process")).toBe(true);
  });
});
