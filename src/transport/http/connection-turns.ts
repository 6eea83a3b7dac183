import { once } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** The promise that settles when the last response queued on a connection is done. */
const lastResponse = new WeakMap<Socket, Promise<void>>();

/**
 * HTTP/1.1 answers pipelined requests in order, and Node queues every answer until the ones
 * before it are sent: a peer that pipelines requests for large bodies and never reads would make
 * the host hold all of them. Here a request's handler runs only once the previous response on
 * its connection is done and the socket's unsent backlog is under `highWaterBytes`, so a
 * connection holds at most one answer body beyond that backlog. (How many requests may wait is
 * bounded by the server's `maxRequestsPerSocket`.)
 */
export async function awaitTurn(
  req: IncomingMessage,
  res: ServerResponse,
  highWaterBytes: number,
): Promise<void> {
  const socket = req.socket;
  const previous = lastResponse.get(socket);
  // 'close' comes once the response is complete or the connection is gone, whichever is first.
  const done = new Promise<void>((resolve) => res.once("close", () => resolve()));
  lastResponse.set(socket, previous ? previous.then(() => done) : done);
  if (previous) await previous;
  while (socket.writableLength > highWaterBytes && !socket.destroyed) {
    await Promise.race([once(socket, "drain"), once(socket, "close")]);
  }
}
