import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { afterEach, describe, expect, test } from "vitest";
import { applyServerLimits } from "../../../src/transport/http/server-limits.js";

const servers: Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

function plainServer(): Server {
  const server = createServer((_req, res) => res.end("ok"));
  servers.push(server);
  return server;
}

const guards = (server: Server) => ({
  maxRequestsPerSocket: server.maxRequestsPerSocket,
  headersTimeout: server.headersTimeout,
  requestTimeout: server.requestTimeout,
  keepAliveTimeout: server.keepAliveTimeout,
});

/**
 * Writes `count` requests on one connection at once and reads until `count` answers have begun,
 * then ends the connection and gives all it read.
 */
async function pipelined(server: Server, count: number): Promise<string> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  const socket = connect(port, "127.0.0.1");
  await once(socket, "connect");
  let read = "";
  socket.on("data", (chunk: Buffer) => {
    read += chunk.toString("latin1");
    if (statuses(read).length >= count) socket.end();
  });
  const request = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  socket.write(request.repeat(count));
  await once(socket, "close");
  return read;
}

// a body ("ok") runs straight into the next answer's status line
const statuses = (answers: string) =>
  Array.from(answers.matchAll(/HTTP\/1\.1 (\d{3}) /g), (m) => Number(m[1]));

describe("the HTTP server's own guards (reliability.md, Limits)", () => {
  test("without limits given, the documented ones replace Node's own", () => {
    const server = plainServer();
    // Node's defaults differ from ours in three of the four
    expect(guards(server)).not.toEqual({
      maxRequestsPerSocket: 256,
      headersTimeout: 30_000,
      requestTimeout: 120_000,
      keepAliveTimeout: 5_000,
    });
    applyServerLimits(server);
    expect(guards(server)).toEqual({
      maxRequestsPerSocket: 256,
      headersTimeout: 30_000,
      requestTimeout: 120_000,
      keepAliveTimeout: 5_000,
    });
  });

  test("each limit given replaces its default alone", () => {
    const server = plainServer();
    applyServerLimits(server, { requestTimeoutMs: 9_000, keepAliveTimeoutMs: 1_500 });
    expect(guards(server)).toEqual({
      maxRequestsPerSocket: 256,
      headersTimeout: 30_000,
      requestTimeout: 9_000,
      keepAliveTimeout: 1_500,
    });
    const other = plainServer();
    applyServerLimits(other, { maxRequestsPerSocket: 3, headersTimeoutMs: 4_000 });
    expect(guards(other)).toEqual({
      maxRequestsPerSocket: 3,
      headersTimeout: 4_000,
      requestTimeout: 120_000,
      keepAliveTimeout: 5_000,
    });
  });

  test("a keep-alive connection carries the requests allowed; the last says close, later pipelined ones get 503", async () => {
    const server = plainServer();
    applyServerLimits(server, { maxRequestsPerSocket: 2 });
    const answers = await pipelined(server, 4);
    expect(statuses(answers)).toEqual([200, 200, 503, 503]);
    const [first, second] = answers.split(/(?=HTTP\/1\.1 \d{3} )/);
    expect(first).toMatch(/^Connection: keep-alive\r$/im);
    expect(second).toMatch(/^Connection: close\r$/im);
  });
});
