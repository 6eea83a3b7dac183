import { createServer, type IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { type ClientOptions, createClient, type SessionmuxClient } from "../../client/client.js";
import { createNodeSocketFactory } from "../../client/node.js";
import { type Principal, principalProblem } from "../../host/principal.js";
import type { MuxUpgradeHandler } from "../mux/mux-server.js";
import { refuseUpgrade } from "../mux/upgrade-gate.js";
import { MemorySocket } from "./memory-socket.js";

/** Options of an in-process client: those of `createClient` that still mean something without a network. */
export type InProcessClientOptions = Omit<ClientOptions, "url" | "token" | "WebSocket" | "socketFactory">;

/**
 * Clients for code running in the host's process (an embedding app, a scheduler), with the SDK's
 * API and no socket to a port. Each connection is a pair of `MemorySocket`s: the client end is
 * the SDK's own `ws` client, the host end goes through a Node HTTP parser to the mux's upgrade
 * handling, so the frames, the mux connection, the activation policy and every limit are the ones
 * a network client meets. Only authentication differs: the caller names the principal, as
 * in-process code is trusted with the host's store anyway.
 */
export class InProcessConnector {
  /** Parses the upgrade request of each in-process connection; never listens on a port. */
  readonly #http = createServer();
  readonly #principals = new WeakMap<Duplex, Principal>();
  /** Clients not closed yet: closing the host closes them, so none retries against a closed mux. */
  readonly #clients = new Set<SessionmuxClient>();

  constructor(
    private readonly mux: MuxUpgradeHandler,
    private readonly muxPath: string,
  ) {
    this.#http.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const principal = this.#principals.get(socket);
      if (!principal)
        return refuseUpgrade(socket, {
          ok: false,
          status: 401,
          code: "unauthorized",
          message: "no principal",
        });
      this.mux.admit(principal, req, socket, head);
    });
    this.#http.on("request", (_req, res) => res.writeHead(404).end());
  }

  /** A client acting as `principal`; it reconnects by itself like any SDK client. */
  connect(principal: Principal, options: InProcessClientOptions = {}): SessionmuxClient {
    const who = checkedPrincipal(principal);
    const socketFactory = createNodeSocketFactory({
      createConnection: () => {
        const [client, host] = MemorySocket.pair();
        this.#principals.set(host, who);
        this.#http.emit("connection", host);
        return client;
      },
    });
    const client = createClient({
      ...options,
      // the host part of the URL is never resolved: the connection above is the transport
      url: `ws://in-process${this.muxPath}`,
      token: "in-process",
      socketFactory,
    });
    this.#clients.add(client);
    const watch = client.state$.subscribe((state) => {
      if (state.name !== "closed") return;
      this.#clients.delete(client);
      queueMicrotask(() => watch.unsubscribe());
    });
    return client;
  }

  /** Closes every client still open (the host is closing). */
  async close(): Promise<void> {
    await Promise.all([...this.#clients].map((client) => client.close()));
    this.#clients.clear();
  }
}

function checkedPrincipal(principal: Principal): Principal {
  const problem = principalProblem(principal);
  if (problem) throw new TypeError(problem.message);
  return Object.freeze({ name: principal.name, admin: principal.admin === true });
}
