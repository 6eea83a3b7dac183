import { once } from "node:events";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import WebSocket, { type RawData, WebSocketServer } from "ws";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { MUX_PATH, SUBPROTOCOL } from "../../protocol/index.js";

/** A frame from the host, decoded. */
export type HostFrameSeen = { type: string; id?: number } & Record<string, unknown>;

export interface MuxProxyOptions {
  /** Replaces the `hello` each socket's host sends first; every other frame passes as sent. */
  rewriteHello?: (hello: HostFrameSeen) => HostFrameSeen;
}

export interface MuxProxy {
  /** Where the page opens the console: the host's files, and its mux through this proxy. */
  readonly url: string;
  /** Upgrades of the mux path the proxy took: one per socket the page opened. */
  readonly upgrades: number;
  /** Frames from the host that `pick` chooses wait at the proxy, in order, until `release`. */
  hold(pick: (frame: HostFrameSeen) => boolean): void;
  /** How many frames wait at the proxy now. */
  readonly held: number;
  /** Sends the held frames on, in the order the host sent them, and holds nothing more. */
  release(): void;
  /**
   * The next frame from the page that `pick` chooses is never passed on: its socket is cut
   * instead, both ends at once, as a path that dies while the frame is on its way.
   */
  cutOn(pick: (frame: HostFrameSeen) => boolean): void;
  /** Cuts every socket open through the proxy, both ends at once; the page may connect again. */
  cut(): void;
  close(): Promise<void>;
}

/**
 * An HTTP server on 127.0.0.1 in front of a real host at `target` (its http:// origin): requests
 * are passed on as they are, and each WebSocket of the mux path is joined to one of its own to
 * the host with the same subprotocol list (the `bearer.` entry carries the token), so the host
 * authenticates the page as it would directly. Frames between them pass unchanged, but for what
 * `options` rewrites and what `hold` keeps back.
 */
export async function startMuxProxy(target: string, options: MuxProxyOptions = {}): Promise<MuxProxy> {
  const host = new URL(target);
  let upgrades = 0;
  let pick: ((frame: HostFrameSeen) => boolean) | undefined;
  let cut: ((frame: HostFrameSeen) => boolean) | undefined;
  const held: { page: WebSocket; data: Uint8Array }[] = [];
  const sockets = new Set<WebSocket>();
  const server = createServer((req, res) => {
    const forward = request(
      { host: host.hostname, port: host.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
  });
  server.on("upgrade", (req, socket, head) => {
    if (new URL(req.url ?? "/", "http://proxy").pathname !== MUX_PATH) return void socket.destroy();
    upgrades += 1;
    wss.handleUpgrade(req, socket, head, (page) => {
      const protocols = String(req.headers["sec-websocket-protocol"] ?? "")
        .split(",")
        .map((p) => p.trim());
      const upstream = new WebSocket(`ws://${host.host}${req.url}`, protocols, { perMessageDeflate: false });
      sockets.add(page).add(upstream);
      const early: RawData[] = [];
      let greeted = false;
      upstream.on("open", () => {
        for (const data of early.splice(0)) upstream.send(data);
      });
      page.on("message", (data) => {
        if (cut?.(decodeFrame(new Uint8Array(data as Buffer)) as HostFrameSeen)) {
          cut = undefined;
          closeBoth();
          return;
        }
        if (upstream.readyState === WebSocket.OPEN) upstream.send(data);
        else early.push(data);
      });
      upstream.on("message", (data) => {
        let bytes: Uint8Array = new Uint8Array(data as Buffer);
        const frame = decodeFrame(bytes, { maxValues: 2 ** 25 }) as HostFrameSeen;
        if (!greeted && frame.type === "hello" && options.rewriteHello) {
          bytes = encodeFrame(options.rewriteHello(frame));
        }
        greeted = true;
        if (pick?.(frame)) held.push({ page, data: bytes });
        else page.send(bytes);
      });
      const closeBoth = () => {
        for (const s of [page, upstream]) if (s.readyState !== WebSocket.CLOSED) s.terminate();
      };
      page.on("close", closeBoth);
      upstream.on("close", closeBoth);
      page.on("error", closeBoth);
      upstream.on("error", closeBoth);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get upgrades() {
      return upgrades;
    },
    get held() {
      return held.length;
    },
    hold(choose) {
      pick = choose;
    },
    release() {
      pick = undefined;
      for (const { page, data } of held.splice(0)) {
        if (page.readyState === WebSocket.OPEN) page.send(data);
      }
    },
    cutOn(choose) {
      cut = choose;
    },
    cut() {
      for (const s of sockets) s.terminate();
      sockets.clear();
    },
    async close() {
      for (const s of sockets) s.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
