import type { Observable } from "rxjs";
import { SessionmuxError } from "../../protocol/errors.js";
import type { HelloFrame, NotificationName } from "../../protocol/index.js";
import { type BackoffPolicy, DEFAULT_BACKOFF } from "./backoff.js";
import { broadcast } from "./broadcast.js";
import {
  type ConnectionEvent,
  type ConnectionState,
  INITIAL_SOCKET_ID,
  INITIAL_STATE,
  isTerminal,
  transition,
} from "./connection-state.js";
import { firstMatch } from "./first-match.js";
import { readHostFrame, unsupportedProtocol } from "./host-frame-reader.js";
import { DEFAULT_KEEPALIVE, KeepAlive, type KeepAliveOptions, keepAliveProbe } from "./keepalive.js";
import { longTimeout } from "./long-timeout.js";
import { browserNetworkSignals, type NetworkSignal, type NetworkSignals } from "./network-signals.js";
import { ConnectionRefusedError, RemoteError, RemoteStreamCarrierError } from "./remote-errors.js";
import { RequestRegistry } from "./request-registry.js";
import { refusalStatus, type SocketFactory, type WebSocketLike } from "./socket.js";
import { createSocketLink, type SocketLink } from "./socket-link.js";

/** How long `close()` waits for the closing handshake before dropping the socket. */
const CLOSE_GRACE_MS = 1_000;

/** How long an upgraded socket may go without the host's `hello` before it is dropped. */
export const DEFAULT_HELLO_TIMEOUT_MS = 10_000;

export interface ConnectionOptions {
  url: string;
  token: string;
  socketFactory: SocketFactory;
  /** @default { baseMs: 250, capMs: 10_000 } */
  backoff?: Partial<BackoffPolicy>;
  /** @default Math.random */
  random?: () => number;
  onNotification?: (name: NotificationName | string, value: unknown) => void;
  /** A host frame the client could not read, or a host `error` frame tied to no call. */
  onError?: (error: SessionmuxError) => void;
  /** `false` turns the client keepalive off. @default { intervalMs: 10_000, pongTimeoutMs: 5_000 } */
  keepAlive?: Partial<KeepAliveOptions> | false;
  /**
   * Network hints (see `NetworkSignal`): an open socket is probed at once, a backoff wait is cut
   * short when the network comes back; `false` ignores them. @default the browser's, none in Node
   */
  network?: NetworkSignals | false;
  /**
   * How long an upgraded socket may wait for the host's `hello` (§3: its first frame) before it is
   * dropped and the client backs off; `Infinity` waits for ever. @default 10_000
   */
  helloTimeoutMs?: number;
}

interface LiveSocket {
  readonly socketId: number;
  readonly socket: WebSocketLike;
  readonly registry: RequestRegistry;
  readonly link: SocketLink;
  readonly closed: Promise<void>;
  /** The host's first frame on this socket, once it arrived. */
  hello?: HelloFrame;
  /** Set once the socket's keepalive exists (never, when turned off). */
  keepAlive?: KeepAlive | undefined;
  /** Stops the wait for the host's `hello`, from the upgrade until it arrives. */
  stopHelloWait?: (() => void) | undefined;
}

/**
 * The physical connection: one socket at a time, one background reconnect loop with full-jitter
 * backoff, state exposed as an observable. Events of a superseded socket are ignored by socket id.
 */
export class Connection {
  readonly #options: ConnectionOptions;
  readonly #policy: BackoffPolicy;
  #state: ConnectionState = INITIAL_STATE;
  /** Every state from the current one on: a new subscriber is handed the current state first. */
  readonly #state$ = broadcast<ConnectionState>((subscriber) => subscriber.next(this.#state));
  #current: LiveSocket | undefined;
  #nextFrameId = 1;
  #openWaits = 0;
  #token: string;
  #lastSocketId = INITIAL_SOCKET_ID;
  #wake: (() => void) | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** Ends the HTTP question about a socket refused before its upgrade, while one is asked. */
  #refusalQuestion: AbortController | undefined;
  readonly #loop: Promise<void>;
  readonly #unwatchNetwork: (() => void) | undefined;

  constructor(options: ConnectionOptions) {
    this.#options = options;
    this.#token = options.token;
    this.#policy = { ...DEFAULT_BACKOFF, ...options.backoff };
    this.#loop = this.#run();
    const network = options.network === false ? undefined : (options.network ?? browserNetworkSignals());
    this.#unwatchNetwork = network?.((signal) => this.#networkSaid(signal));
  }

  /**
   * A network hint: an open socket is probed now (its path may be gone: no network, another one,
   * a machine that slept); a backoff wait ends at once when the network may be back.
   */
  #networkSaid(signal: NetworkSignal): void {
    const state = this.#state;
    if (state.name === "open") this.#current?.keepAlive?.probeNow();
    else if (state.name === "backoff" && signal !== "offline") this.#wake?.();
  }

  /** The connection state; replays the current one to new subscribers. */
  get state$(): Observable<ConnectionState> {
    return this.#state$.observable;
  }

  /** The current connection state. */
  get state(): ConnectionState {
    return this.#state;
  }

  /**
   * Resolves with the open socket, waiting through reconnects; rejects with
   * `ConnectionRefusedError` while the host refuses the connection (past 429 too, which the
   * client retries: when the principal's other sockets close is not for a call to wait on), with
   * `unsupported_protocol` while it speaks another protocol version, and once the client is closed.
   */
  whenOpen(signal?: AbortSignal): Promise<SocketLink> {
    return new Promise<SocketLink>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      this.#openWaits += 1;
      const settled = () => {
        this.#openWaits -= 1;
        signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        settled();
        stop();
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      // A completed subject replays nothing: a closed connection ends at once through `done`.
      const stop = firstMatch(
        this.#state$.observable,
        (s) => s.name === "open" || isTerminal(s) || (s as { status?: number }).status === 429,
        (s) => {
          settled();
          try {
            resolve(this.#linkIn(s));
          } catch (error) {
            reject(error);
          }
        },
        () => {
          settled();
          reject(new RemoteStreamCarrierError("client_closed"));
        },
      );
    });
  }

  /** How many `whenOpen` waits are pending: each holds a listener on the state until it settles. */
  get openWaits(): number {
    return this.#openWaits;
  }

  /** The link of the socket an `open` state names, or the error a terminal state means. */
  #linkIn(s: ConnectionState): SocketLink {
    const current = this.#current;
    if (s.name === "open" && current && current.socketId === s.socketId) return current.link;
    if (s.name === "open") throw new RemoteStreamCarrierError("socket_lost");
    // `unauthorized`, `rejected`, or a `backoff` refused 429 (the only one that settles a wait)
    if ("status" in s) throw new ConnectionRefusedError(s.status!, this.#options.url);
    if (s.name === "incompatible") throw unsupportedProtocol(s.protocol);
    throw new RemoteStreamCarrierError("client_closed");
  }

  /** Skips the rest of a backoff wait, or leaves `unauthorized`/`rejected`/`incompatible`, and connects now. */
  reconnectNow(): void {
    this.#leaveRefusal();
    this.#wake?.();
  }

  /** Uses `token` for every later connect; leaves `unauthorized` at once. The open socket stays. */
  setToken(token: string): void {
    this.#token = token;
    if (this.#state.name === "unauthorized") this.reconnectNow();
  }

  /** Leaves a terminal state but `closed` synchronously, so a call made right after waits for the new socket. */
  #leaveRefusal(): void {
    // `closed` has no way out: the event is ignored there
    if (isTerminal(this.#state)) {
      this.#lastSocketId += 1;
      this.#dispatch({ type: "reconnect", socketId: this.#lastSocketId });
    }
  }

  /** Stops backoff, closes the socket, waits for the background loop to finish. */
  async close(): Promise<void> {
    this.#unwatchNetwork?.();
    this.#dispatch({ type: "close" });
    this.#wake?.();
    // An unreachable or slow host would hold the close for the question's whole limit.
    this.#refusalQuestion?.abort(new RemoteStreamCarrierError("client_closed"));
    const current = this.#current;
    if (current) {
      current.registry.failAll(new RemoteStreamCarrierError("client_closed"));
      await this.#closeSocket(current);
    }
    await this.#loop;
    this.#state$.complete();
  }

  #dispatch(event: ConnectionEvent): void {
    const next = transition(this.#state, event, {
      now: Date.now(),
      random: this.#options.random ?? Math.random,
      policy: this.#policy,
    });
    if (next === this.#state) return;
    this.#state = next;
    this.#state$.next(next);
  }

  /** The reconnect loop: state is re-checked after every await (close() may have run meanwhile). */
  async #run(): Promise<void> {
    for (;;) {
      const state = this.#state;
      switch (state.name) {
        case "closed":
          return;
        case "connecting":
          // resolves once the socket is gone: the `open` state lasts while this waits
          await this.#connectOnce(state.socketId);
          break;
        case "backoff":
          await this.#sleep(state.nextAttemptAt - Date.now());
          if (this.#state.name === "backoff") {
            this.#lastSocketId += 1;
            this.#dispatch({ type: "retry", socketId: this.#lastSocketId });
          }
          break;
        default:
          // unauthorized, rejected or incompatible: the caller leaves it (setToken, reconnectNow) or closes.
          await this.#sleep(Number.POSITIVE_INFINITY);
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        if (this.#timer !== undefined) clearTimeout(this.#timer);
        this.#timer = undefined;
        this.#wake = undefined;
        resolve();
      };
      this.#wake = done;
      // A terminal state waits for the caller (no timer), so an idle client keeps no handle open.
      if (Number.isFinite(ms)) this.#timer = setTimeout(done, Math.max(0, ms));
    });
  }

  /** Opens one socket and resolves when it is gone. */
  #connectOnce(socketId: number): Promise<void> {
    const token = this.#token;
    let socket: WebSocketLike;
    try {
      socket = this.#options.socketFactory(this.#options.url, token);
    } catch {
      this.#dispatch({ type: "lost", socketId });
      return Promise.resolve();
    }
    socket.binaryType = "arraybuffer";
    const registry = new RequestRegistry();
    let resolveClosed!: () => void;
    const closed = new Promise<void>((resolve) => {
      resolveClosed = resolve;
    });
    const live: LiveSocket = {
      socketId,
      socket,
      registry,
      link: createSocketLink({
        socketId,
        socket,
        registry,
        nextFrameId: () => this.#nextFrameId++,
        isCurrent: () => this.#current?.socketId === socketId,
        maxPayloadBytes: () => live.hello?.maxPayloadBytes,
      }),
      closed,
    };
    this.#current = live;
    const keepAlive = this.#keepAlive(live);
    live.keepAlive = keepAlive;
    socket.onmessage = (event) => {
      if (this.#current !== live) return;
      keepAlive?.heard();
      this.#receive(live, event.data);
    };
    socket.onheartbeat = () => keepAlive?.heard();
    let upgraded = false;
    socket.onopen = () => {
      upgraded = true;
      keepAlive?.heard();
      live.stopHelloWait = this.#awaitHello(live);
    };
    socket.onerror = () => {};
    socket.onclose = (event) => {
      keepAlive?.stop();
      live.stopHelloWait?.();
      socket.onmessage = null;
      socket.onclose = null;
      registry.failAll(new RemoteStreamCarrierError("socket_lost"));
      if (this.#current === live) this.#current = undefined;
      // A socket the caller's close() cut while it connected was refused by no host: asking the
      // host why (a browser's HTTP question) would open a connection after the close and hold it.
      if (upgraded || this.#state.name === "closed") {
        // Closed before the hello with 4000 + an HTTP status: refused as with that status, told so
        // a browser can read it (it hides a refused upgrade's status, §2). Our own drop (4000) is a
        // loss.
        const status = event.code - 4000;
        // Synchronously, so a call retried right after its carrier error waits for the next socket.
        this.#dispatch({
          type: !live.hello && status > 0 ? "refused" : "lost",
          socketId,
          status,
        } as ConnectionEvent);
        return resolveClosed();
      }
      const question = new AbortController();
      this.#refusalQuestion = question;
      void refusalStatus(socket, question.signal).then((status) => {
        if (this.#refusalQuestion === question) this.#refusalQuestion = undefined;
        // The token refused is not the one the caller set meanwhile (setToken during the connect):
        // waiting `unauthorized` for a token it already has would be a lie; try the new one.
        const stale = (status === 401 || status === 403) && token !== this.#token;
        this.#dispatch(
          status === undefined || stale ? { type: "lost", socketId } : { type: "refused", socketId, status },
        );
        resolveClosed();
      });
    };
    if (this.#state.name === "closed") this.#closeSocket(live);
    return closed;
  }

  /** The socket's keepalive, unless turned off; a dead path is dropped like a lost socket. */
  #keepAlive(live: LiveSocket): KeepAlive | undefined {
    if (this.#options.keepAlive === false) return undefined;
    const probe = keepAliveProbe(live.socket, () => this.#nextFrameId++);
    return new KeepAlive({ ...DEFAULT_KEEPALIVE, ...this.#options.keepAlive }, probe, () => this.#drop(live));
  }

  /**
   * A socket that upgraded but whose host says nothing (no sessionmux behind the URL, a hello it
   * could not read) would keep the client `connecting` for ever, its pings answered: it is
   * dropped once the wait is over, so the client backs off and tries again. Returns the stop.
   */
  #awaitHello(live: LiveSocket): () => void {
    const ms = this.#options.helloTimeoutMs ?? DEFAULT_HELLO_TIMEOUT_MS;
    return longTimeout(() => {
      if (live.hello !== undefined || this.#current !== live) return;
      this.#options.onError?.(
        new SessionmuxError(
          "timeout",
          `no hello from ${this.#options.url} in ${ms} ms: is it a sessionmux host?`,
          { data: { helloTimeoutMs: ms } },
        ),
      );
      this.#drop(live);
    }, ms);
  }

  /** Gives up a socket whose path is dead: now, without waiting for TCP or a closing handshake. */
  #drop(live: LiveSocket): void {
    const { socket } = live;
    const onclose = socket.onclose;
    if (socket.terminate) socket.terminate();
    else {
      try {
        socket.close(4000, "keepalive timeout");
      } catch {
        // Already closing.
      }
    }
    // A browser fires `close` only after its closing handshake times out; settle everything now.
    onclose?.({ code: 4000, reason: "keepalive timeout" });
  }

  #receive(live: LiveSocket, data: unknown): void {
    const reading = readHostFrame(data);
    if (!reading.ok) {
      // Answer the call or stream the frame was for, so it does not wait for a socket death.
      if (reading.id !== undefined) live.registry.fail(reading.id, reading.error);
      // A host of another version, met in its first frame: stop here rather than retry for ever,
      // and in that state before the error is told, so whoever hears it reads the state it caused.
      if (reading.protocol !== undefined && live.hello === undefined) {
        live.stopHelloWait?.();
        this.#dispatch({ type: "incompatible", socketId: live.socketId, protocol: reading.protocol });
        void this.#closeSocket(live);
      }
      this.#options.onError?.(reading.error);
      return;
    }
    const frame = reading.frame;
    switch (frame.type) {
      case "hello":
        live.hello = frame as HelloFrame;
        live.stopHelloWait?.();
        this.#dispatch({ type: "hello", socketId: live.socketId, hello: frame as HelloFrame });
        return;
      case "event":
        this.#options.onNotification?.(frame.name, frame.value);
        return;
      case "error":
        if (frame.id === undefined || !live.registry.deliver(frame)) {
          this.#options.onError?.(RemoteError.fromWireError(frame.error));
        }
        return;
      default:
        live.registry.deliver(frame);
    }
  }

  async #closeSocket(live: LiveSocket): Promise<void> {
    try {
      live.socket.close(1000, "client closed");
    } catch {
      live.socket.terminate?.();
    }
    let grace: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<void>((resolve) => {
      grace = setTimeout(() => {
        live.socket.terminate?.();
        resolve();
      }, CLOSE_GRACE_MS);
    });
    await Promise.race([live.closed, timedOut]);
    clearTimeout(grace);
  }
}
