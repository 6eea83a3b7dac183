import { once } from "node:events";
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
    a.destroy();
    await closed;
    expect(b.destroyed).toBe(true);
  });
});
