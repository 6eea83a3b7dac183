import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** The promise that settles when the last response queued on a connection is done. */
const lastResponse = new WeakMap<Socket, Promise<void>>();
/** Requests of a connection waiting for the answer before theirs. */
const waiting = new WeakMap<Socket, number>();

/**
 * @default 256 — requests one connection may have waiting for their turn; one more closes the
 * connection (the ones before it still wait for their answers, so none can be given out of turn).
 */
export const MAX_WAITING_REQUESTS = 256;

/**
 * HTTP/1.1 answers pipelined requests in order, and Node queues every answer until the ones
 * before it are sent: a peer that pipelines requests for large bodies and never reads would make
 * the host hold all of them. Here a request's handler runs only once the previous response on
 * its connection is done and the socket's unsent backlog is under `highWaterBytes`, so a
 * connection holds at most one answer body beyond that backlog. A finished answer of the host's
 * has left the socket already; the backlog is that of an app that mounts the host, whose own
 * answers on the connection are not tracked here. How many requests may wait is
 * bounded here too: the host's own server also stops a connection at 256 requests, but an app's
 * server that mounts the host has no such bound, and Node keeps parsing pipelined requests while
 * the answers before them have written nothing. Resolves false when the connection was closed
 * for one request too many: that request is not to be handled.
 */
export async function awaitTurn(
  req: IncomingMessage,
  res: ServerResponse,
  highWaterBytes: number,
  maxWaiting = MAX_WAITING_REQUESTS,
): Promise<boolean> {
  const socket = req.socket;
  const previous = lastResponse.get(socket);
  if (previous) {
    const queued = (waiting.get(socket) ?? 0) + 1;
    if (queued > maxWaiting) {
      socket.destroy();
      return false;
    }
    waiting.set(socket, queued);
  }
  // 'close' comes once the response is complete or the connection is gone, whichever is first.
  const done = new Promise<void>((resolve) => res.once("close", () => resolve()));
  lastResponse.set(socket, previous ? previous.then(() => done) : done);
  if (previous) {
    await previous;
    waiting.set(socket, (waiting.get(socket) ?? 1) - 1);
  }
  while (socket.writableLength > highWaterBytes && !socket.destroyed) await drainOrClose(socket);
  return true;
}

/**
 * Settles on the socket's next 'drain' or its 'close'. Never rejects: a peer that resets the
 * connection makes the socket emit 'error' before 'close', and that is its going away, not a
 * failure of the request (`events.once` would reject with it).
 */
function drainOrClose(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    const settle = () => {
      socket.off("drain", settle);
      socket.off("close", settle);
      resolve();
    };
    socket.on("drain", settle);
    socket.on("close", settle);
  });
}
