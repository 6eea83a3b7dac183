import { once } from "node:events";
import { createServer, type IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { Limits } from "../../protocol/limits.js";
import { mountSessionmux } from "../../src/embed/mount-sessionmux.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";
import { withMembers } from "../support/with-members.js";
import { listen } from "./app-fixture.js";

const cleanups = cleanupsAfterEach();
const MIB = 1024 * 1024;
/** Far more than loopback's socket buffers take, so most of it stays in the server's socket. */
const APP_ANSWER_BYTES = 32 * MIB;

describe("a mounted host behind an app's large answer on the same connection", () => {
  it("handles its request only once the peer has read the app's answer down to the send high-water mark", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    // the host's usage route reads the caller's stored bytes first thing: who has been served
    const served: string[] = [];
    const mux = await mountSessionmux(
      {
        db: dir.file("sessions.db"),
        basePath: "/chat",
        tokens: [
          { name: "alice", secret: "alice-secret", admin: false },
          { name: "bob", secret: "bob-secret", admin: false },
        ],
      },
      {
        claimAll: false,
        storeView: (store) =>
          withMembers(store, {
            ownerStoredBytes: (owner: string) => {
              served.push(owner);
              return store.ownerStoredBytes(owner);
            },
          }),
      },
    );
    cleanups.push(() => mux.close());
    const appAnswer = Buffer.alloc(APP_ANSWER_BYTES, 0x61);
    const server = createServer((req, res) => {
      if (req.url === "/export") return void res.end(appAnswer);
      res.writeHead(404).end();
    });
    mux.attach(server);
    const parsed: IncomingMessage[] = [];
    server.on("request", (req: IncomingMessage) => parsed.push(req));
    const authority = await listen(server);
    cleanups.push(() => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    });

    const [hostname, port] = authority.split(":") as [string, string];
    const socket: Socket = connect(Number(port), hostname);
    cleanups.push(() => void socket.destroy());
    socket.on("error", () => {});
    await once(socket, "connect");
    socket.pause();
    // one write: the app's request and, pipelined behind it, the host's
    socket.write(
      `GET /export HTTP/1.1\r\nHost: ${authority}\r\n\r\n` +
        `GET /chat/v1/usage HTTP/1.1\r\nHost: ${authority}\r\nAuthorization: Bearer alice-secret\r\n\r\n`,
    );
    const hostRequest = await until(() => parsed[1], 10_000, "the host's request parsed");
    // the app's answer is still held in the server's socket, past the mark
    expect(hostRequest.socket.writableLength).toBeGreaterThan(Limits.sendHighWaterBytes);

    // another connection is served meanwhile; the request behind the app's answer has not begun
    const other = await fetch(`http://${authority}/chat/v1/usage`, {
      headers: { authorization: "Bearer bob-secret" },
    });
    expect(other.status).toBe(200);
    expect(served).toEqual(["bob"]);

    // read: the app's answer whole, then the host's, in order
    let head = "";
    let tail = "";
    let received = 0;
    socket.on("data", (chunk: Buffer) => {
      if (received === 0) head = chunk.subarray(0, 64).toString("latin1");
      received += chunk.length;
      tail = (tail + chunk.toString("latin1")).slice(-1024);
    });
    socket.resume();
    const usage = '{"principal":"alice","stored_bytes":0,"max_stored_bytes":1073741824}';
    await until(() => received > APP_ANSWER_BYTES && tail.endsWith(usage), 30_000, "both answers read");
    expect(head).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(tail).toMatch(/a{64}HTTP\/1\.1 200 OK\r\n/);
    expect(served).toEqual(["bob", "alice"]);
  });
});
