import { once } from "node:events";
import { createConnection, createServer, type Socket } from "node:net";
import { Transform } from "node:stream";

export interface RandomCuts {
  /** Shortest and longest pause between two cuts, in ms. */
  minMs: number;
  maxMs: number;
  /** How many cuts to make before stopping. */
  count: number;
}

export interface TcpProxy {
  /** The port on 127.0.0.1 that forwards to the target. */
  readonly port: number;
  /** Cuts made so far (by `cutAll` or random cuts). */
  readonly cuts: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Forwarded connections neither side has closed yet (a silenced one counts until its client closes it). */
  readonly open: number;
  /** Silenced connections (`silenceAll`, `cutAllUnnoticed`) whose client has not closed them yet. */
  readonly silenced: number;
  /** Open connections still forwarding whose client's first bytes `which` accepts (see `silenceAll`). */
  forwarding(which: (opening: Buffer) => boolean): number;
  /** Destroys every forwarded connection now (both sides); new connections are still accepted. */
  cutAll(): number;
  /**
   * Ends every current connection whose client's first bytes `which` accepts (all without it) on
   * the target's side only, as a blip during which the server ended them does: the client's side
   * stays open and hears nothing, so a connection idle in a pool looks sound, and its next bytes
   * are answered with a reset (ECONNRESET), as by a peer that no longer knows the connection. New
   * connections are still accepted. Returns how many were cut (none silenced or cut before).
   */
  cutAllUnnoticed(which?: (opening: Buffer) => boolean): number;
  /**
   * Stops forwarding on every current connection without closing it, as a dead network path does:
   * both TCP connections stay established and nothing more arrives. New connections still work.
   * What the client sends is read and dropped, so its close is still seen (`open`). With `which`,
   * only the connections whose client's first bytes it accepts (a PostgreSQL startup message names
   * the connection's `application_name`): the others go on; `which` is also handed the local port
   * of the proxy's connection to the target (a PostgreSQL backend's `client_port`). Returns how
   * many were silenced.
   */
  silenceAll(which?: (opening: Buffer, targetSidePort: number | undefined) => boolean): number;
  /**
   * From now on, until called with nothing, a new connection whose client's first bytes `which`
   * accepts is silenced as they arrive, before they are forwarded: its handshake hangs, as over a
   * path that is still dead. Counted in `silenced` while open.
   */
  silenceNew(which?: (opening: Buffer) => boolean): void;
  /**
   * While true, a new connection is closed as soon as it is accepted, before anything reaches the
   * target, as by a server that is down: the client's connect fails at once.
   */
  refuseNew(refusing: boolean): void;
  /** Cuts everything at random pauses in [minMs, maxMs]; resolves after `count` cuts or `stop()`. */
  startRandomCuts(options: RandomCuts): Promise<void>;
  /** Stops random cuts, destroys every connection and closes the listener. */
  stop(): Promise<void>;
}

/**
 * A TCP proxy on 127.0.0.1 port 0 forwarding to 127.0.0.1:`targetPort`, able to cut every
 * connection on demand or at random intervals. Cutting destroys both sockets, so the client sees
 * an abrupt loss (no WebSocket close frame), as after a network failure. A function as
 * `targetPort` picks the target per connection, as a load balancer over several hosts does.
 */
export async function startTcpProxy(
  targetPort: number | (() => number),
  options: {
    random?: () => number;
    /** Called per accepted connection: it is handed every byte each side sends. */
    tap?: () => { fromClient(chunk: Buffer): void; fromHost(chunk: Buffer): void };
    /** The host's bytes reach the client at most this fast, as over a slow link (default: at once). */
    hostBytesPerSecond?: number;
  } = {},
): Promise<TcpProxy> {
  const random = options.random ?? Math.random;
  interface Pair {
    client: Socket;
    upstream: Socket;
    opening: Buffer;
    silenced: boolean;
    /** Closes both sides, once either closed or failed. */
    drop: () => void;
  }
  const pairs = new Set<Pair>();
  let cuts = 0;
  let accepted = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let finishCuts: (() => void) | undefined;
  let silenceNew: ((opening: Buffer) => boolean) | undefined;
  let refusing = false;

  const server = createServer((client) => {
    accepted += 1;
    if (refusing) {
      client.destroy();
      return;
    }
    const port = typeof targetPort === "number" ? targetPort : targetPort();
    const upstream = createConnection({ host: "127.0.0.1", port });
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    const pair: Pair = { client, upstream, opening: Buffer.alloc(0), silenced: false, drop };
    pairs.add(pair);
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    const tap = options.tap?.();
    if (tap) {
      client.on("data", (chunk: Buffer) => tap.fromClient(chunk));
      upstream.on("data", (chunk: Buffer) => tap.fromHost(chunk));
    }
    // the client's first bytes say what the connection is (see `silenceAll`, `silenceNew`)
    client.once("data", (opening: Buffer) => {
      pair.opening = opening;
      // silenced before it said anything: its bytes are dropped already
      if (pair.silenced) return;
      if (silenceNew?.(opening)) {
        pair.silenced = true;
        client.on("data", () => undefined);
        upstream.pause();
        return;
      }
      upstream.write(opening);
      client.pipe(upstream);
    });
    if (options.hostBytesPerSecond === undefined) upstream.pipe(client);
    else {
      const link = slowLink(options.hostBytesPerSecond);
      client.on("close", () => link.destroy());
      upstream.pipe(link).pipe(client);
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("proxy has no TCP address");

  const cutAll = (): number => {
    const n = pairs.size;
    for (const { client, upstream } of [...pairs]) {
      client.destroy();
      upstream.destroy();
    }
    pairs.clear();
    cuts += 1;
    return n;
  };

  const cutAllUnnoticed = (which: (opening: Buffer) => boolean = () => true): number => {
    let cut = 0;
    for (const pair of pairs) {
      const { client, upstream, opening, drop } = pair;
      // one silenced or cut already is left as it is
      if (pair.silenced || !which(opening)) continue;
      pair.silenced = true;
      client.unpipe(upstream);
      upstream.unpipe(client);
      // the target's side closes; the client's is left as it is until the client sends
      upstream
        .off("close", drop)
        .off("error", drop)
        .on("error", () => undefined);
      upstream.destroy();
      client.on("data", () => client.resetAndDestroy()).resume();
      cut += 1;
    }
    return cut;
  };

  const silenceAll = (
    which: (opening: Buffer, targetSidePort: number | undefined) => boolean = () => true,
  ): number => {
    let silenced = 0;
    for (const pair of pairs) {
      const { client, upstream, opening } = pair;
      if (!which(opening, upstream.localPort)) continue;
      pair.silenced = true;
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.on("data", () => undefined).resume();
      upstream.pause();
      silenced += 1;
    }
    return silenced;
  };

  const stopCuts = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    finishCuts?.();
    finishCuts = undefined;
  };

  return {
    port: address.port,
    get cuts() {
      return cuts;
    },
    get accepted() {
      return accepted;
    },
    get open() {
      return pairs.size;
    },
    get silenced() {
      return [...pairs].filter((pair) => pair.silenced).length;
    },
    refuseNew(on) {
      refusing = on;
    },
    silenceNew(which) {
      silenceNew = which;
    },
    forwarding(which) {
      return [...pairs].filter((pair) => !pair.silenced && which(pair.opening)).length;
    },
    cutAll,
    cutAllUnnoticed,
    silenceAll,
    startRandomCuts({ minMs, maxMs, count }) {
      stopCuts();
      return new Promise<void>((resolve) => {
        let left = count;
        finishCuts = resolve;
        const schedule = () => {
          if (left <= 0) return stopCuts();
          timer = setTimeout(
            () => {
              left -= 1;
              cutAll();
              schedule();
            },
            minMs + random() * (maxMs - minMs),
          );
        };
        schedule();
      });
    },
    async stop() {
      stopCuts();
      for (const { client, upstream } of [...pairs]) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Passes bytes on at most `bytesPerSecond`, a twentieth of it every 50 ms, taking more only as it
 * passes them: the sender meets the backpressure of a slow link.
 */
function slowLink(bytesPerSecond: number): Transform {
  const slice = Math.max(1, Math.floor(bytesPerSecond / 20));
  return new Transform({
    highWaterMark: slice,
    transform(chunk: Buffer, _encoding, done) {
      let at = 0;
      const step = () => {
        if (at >= chunk.length || this.destroyed) return done();
        this.push(chunk.subarray(at, at + slice));
        at += slice;
        setTimeout(step, 50);
      };
      step();
    },
  });
}
