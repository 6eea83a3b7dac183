import { Observable, type Observable as ObservableType } from "rxjs";
import type {
  CallMethod,
  HelloFrame,
  ItemOf,
  NotificationName,
  NotificationValue,
  ParamsOf,
  ResultOf,
  SessionmuxError,
  SessionPage,
  StreamMethod,
} from "../../protocol/index.js";
import { type IterateOptions, type LiveStream, liveStream } from "./async-iteration.js";
import { type Attachment, type DownloadOptions, downloadAttachment } from "./attachment-download.js";
import type { BackoffPolicy } from "./backoff.js";
import { broadcast } from "./broadcast.js";
import { type CallOptions, callDeadline, DEFAULT_CALL_TIMEOUT_MS } from "./call-deadline.js";
import { isResendable } from "./call-retry.js";
import { Connection } from "./connection.js";
import type { ConnectionState } from "./connection-state.js";
import { type ControlMirrorOptions, controlMirror } from "./control-mirror.js";
import type { ControlMirror } from "./control-mirror-reducer.js";
import type { FollowUpdate } from "./follow-cursor.js";
import { type FollowOptions, followSession } from "./follow-session.js";
import type { KeepAliveOptions } from "./keepalive.js";
import type { NetworkSignals } from "./network-signals.js";
import { RemoteStreamCarrierError } from "./remote-errors.js";
import { browserSocketFactory, type SocketFactory, type WebSocketConstructor } from "./socket.js";

export interface ClientOptions {
  /** `ws://host:port/api/remote.mux` */
  url: string;
  token: string;
  /** A browser-style WebSocket class; the token then rides as the `bearer.` subprotocol. @default globalThis.WebSocket */
  WebSocket?: WebSocketConstructor;
  /** Overrides `WebSocket`: how to open one authenticated socket (the Node entry passes one using headers). */
  socketFactory?: SocketFactory;
  /** @default { baseMs: 250, capMs: 10_000 } */
  backoff?: Partial<BackoffPolicy>;
  /** @default Math.random */
  random?: () => number;
  /** Default timeout of every unary call, including the wait for a socket; `Infinity` disables it. @default 30_000 */
  callTimeoutMs?: number;
  /**
   * Reports what the client could not tie to a call: an undecodable or invalid host frame (the call
   * it names, if readable, is answered with `invalid_host_frame`), a host `error` frame without id.
   * Every report is also on `errors$`. @default console.warn
   */
  onError?: (error: SessionmuxError) => void;
  /** Client keepalive (§2 "Clients may ping"); `false` turns it off. @default { intervalMs: 10_000, pongTimeoutMs: 5_000 } */
  keepAlive?: Partial<KeepAliveOptions> | false;
  /**
   * Network hints: on `offline`, `online` or a page shown again, an open socket is probed at once
   * (a dead path is dropped within `pongTimeoutMs`) and a backoff wait ends when the network is
   * back; `false` ignores them. @default the browser's `online`/`offline`/`visibilitychange`, none in Node
   */
  network?: NetworkSignals | false;
  /**
   * How long an upgraded socket may wait for the host's `hello` before it is dropped (reported on
   * `onError` as `timeout`) and the client backs off: a URL served by something else leaves the
   * client `connecting` no longer than this. `Infinity` waits for ever. @default 10_000
   */
  helloTimeoutMs?: number;
}

/** `session.prompt` params where `clientMessageId` is optional: one is generated when missing. */
export type PromptParams = Omit<ParamsOf<"session.prompt">, "clientMessageId"> & { clientMessageId?: string };

type Handler = (value: unknown) => void;

/**
 * The client's public members as a plain object type. `sessionmux` (whose `mux.connect` makes
 * one) and `@sessionmux/client` each ship their own declaration of the class, and a class with
 * private fields matches only its own declaration: code that takes a client from either package
 * types its parameter with this.
 */
export type SessionmuxClientApi = { [K in keyof SessionmuxClient]: SessionmuxClient[K] };

/** A typed client over one WebSocket that reconnects by itself (protocol-v1 §2–§6). */
export class SessionmuxClient {
  readonly #connection: Connection;
  readonly #handlers = new Map<string, Set<Handler>>();
  readonly #callTimeoutMs: number;
  readonly #errors$ = broadcast<SessionmuxError>();

  constructor(options: ClientOptions) {
    this.#callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    const factory = options.socketFactory ?? browserSocketFactory(options.WebSocket ?? defaultWebSocket());
    // the connection's options are the client's, under the same names; absent ones keep their defaults
    this.#connection = new Connection({
      ...options,
      socketFactory: factory,
      onError: (error) => {
        (options.onError ?? defaultOnError)(error);
        this.#errors$.next(error);
      },
      onNotification: (name, value) => {
        for (const handler of [...(this.#handlers.get(name) ?? [])]) handler(value);
      },
    });
  }

  /** The connection state (`connecting`, `open`, `backoff` with `nextAttemptAt`, `unauthorized`, `rejected`, `incompatible`, `closed`). */
  get state$(): ObservableType<ConnectionState> {
    return this.#connection.state$;
  }

  /** Host frames the client could not read and host errors tied to no call (see `ClientOptions.onError`). */
  get errors$(): ObservableType<SessionmuxError> {
    return this.#errors$.observable;
  }

  /** The current connection state. */
  get state(): ConnectionState {
    return this.#connection.state;
  }

  /**
   * How many calls and streams wait for an open socket (none is sent while offline); one given up
   * (a call's timeout or signal, a stream unsubscribed) stops waiting at once.
   */
  get waitingForSocket(): number {
    return this.#connection.openWaits;
  }

  /** The `hello` of the open socket, if any: `hostId` and `generation`. */
  get hello(): HelloFrame | undefined {
    const s = this.#connection.state;
    return s.name === "open" ? s.hello : undefined;
  }

  /** Emits each `hello` (every successful connect), so a caller can notice a host restart. */
  get hello$(): ObservableType<HelloFrame> {
    return new Observable<HelloFrame>((subscriber) => {
      let last: HelloFrame | undefined;
      return this.#connection.state$.subscribe({
        next: (s) => {
          if (s.name === "open" && s.hello !== last) {
            last = s.hello;
            subscriber.next(s.hello);
          }
        },
        complete: () => subscriber.complete(),
      });
    });
  }

  /**
   * One unary call. Waits for an open socket; if that socket dies, resendable methods are sent again
   * on the next one, others reject with `RemoteStreamCarrierError`. Host errors reject with
   * `RemoteError`; a refused connection with `ConnectionRefusedError`; the timeout (default 30 s)
   * and the caller's signal with a SessionmuxError coded `timeout` or `aborted`, whose `data.sent`
   * says whether the call ever reached an open socket (false: the host never saw it). `session.attachment`
   * is read with `download`, its timeout counting from the last piece that arrived.
   */
  async call<M extends CallMethod>(
    method: M,
    params: ParamsOf<M>,
    options: CallOptions = {},
  ): Promise<ResultOf<M>> {
    if (method === "session.attachment") {
      const { sessionId, attachmentId } = params as ParamsOf<"session.attachment">;
      return this.download(sessionId, attachmentId, {
        ...(options.signal ? { signal: options.signal } : {}),
        ...(options.timeoutMs !== undefined ? { idleTimeoutMs: options.timeoutMs } : {}),
      }) as Promise<ResultOf<M>>;
    }
    return this.#callOnce(method, params, options);
  }

  /**
   * Reads an attachment in pieces (§5 `session.download`), resuming at the byte reached after a
   * lost socket; `call("session.attachment")` comes here too. A host without `session.download`
   * is asked with `session.attachment`, whose answer is one message.
   */
  download(sessionId: string, attachmentId: string, options: DownloadOptions = {}): Promise<Attachment> {
    const params = { sessionId, attachmentId };
    const idleTimeoutMs = options.idleTimeoutMs ?? this.#callTimeoutMs;
    return downloadAttachment(this, params, { ...options, idleTimeoutMs }, () =>
      this.#callOnce("session.attachment", params, {
        timeoutMs: idleTimeoutMs,
        ...(options.signal ? { signal: options.signal } : {}),
      }),
    );
  }

  async #callOnce<M extends CallMethod>(
    method: M,
    params: ParamsOf<M>,
    options: CallOptions,
  ): Promise<ResultOf<M>> {
    let sent = false;
    const deadline = callDeadline(
      method,
      options.timeoutMs ?? this.#callTimeoutMs,
      options.signal,
      () => describeState(this.#connection.state, sent),
      () => sent,
    );
    try {
      for (;;) {
        const link = await this.#connection.whenOpen(deadline.signal);
        deadline.check();
        // `link.call` sends synchronously unless the deadline already fired.
        if (!deadline.signal.aborted) sent = true;
        try {
          return (await link.call(method, params, deadline.signal)) as ResultOf<M>;
        } catch (error) {
          if (error instanceof RemoteStreamCarrierError && error.retryable && isResendable(method)) continue;
          throw error;
        }
      }
    } finally {
      deadline.dispose();
    }
  }

  /**
   * One logical stream as a cold Observable: subscribing sends `open` once a socket is open,
   * unsubscribing sends `close`. A lost socket errors it with `RemoteStreamCarrierError`.
   */
  open<M extends StreamMethod>(method: M, params: ParamsOf<M>): ObservableType<ItemOf<M>> {
    return new Observable<ItemOf<M>>((subscriber) => {
      let unsubscribed = false;
      let teardown: (() => void) | undefined;
      // Unsubscribed before a socket opened: the wait ends now rather than at the next open.
      const waiting = new AbortController();
      this.#connection.whenOpen(waiting.signal).then(
        (link) => {
          if (unsubscribed) return;
          const id = link.openStream(method, params, {
            item: (value) => subscriber.next(value as ItemOf<M>),
            end: () => subscriber.complete(),
            error: (error) => subscriber.error(error),
          });
          teardown = () => link.closeStream(id);
        },
        // after an unsubscribe (the wait aborted) rxjs drops the error
        (error: unknown) => subscriber.error(error),
      );
      return () => {
        unsubscribed = true;
        waiting.abort();
        teardown?.();
      };
    });
  }

  /**
   * `followSession` as a method: the session's updates across reconnects, as an Observable that
   * can also be read with `for await (const update of client.follow(id))`.
   */
  follow(sessionId: string, options: FollowOptions & IterateOptions = {}): LiveStream<FollowUpdate> {
    // a buffered update weighs its events' JSON, or its epoch: a host's item may hold up to a
    // message of either (an opened or reset one too, its epoch a string of any length)
    return liveStream(followSession(this, sessionId, options), options, (update) =>
      update.kind === "events"
        ? JSON.stringify(update.events).length
        : "epoch" in update
          ? update.epoch.length
          : 0,
    );
  }

  /** `controlMirror` as a method: the live-state mirror, as an Observable that can also be read with `for await`. */
  control(options: ControlMirrorOptions & IterateOptions = {}): LiveStream<ControlMirror> {
    // a buffered mirror weighs the change it took (a host's item may fill a message): what did
    // not change it shares with the values before it
    return liveStream(
      controlMirror(this, options),
      options,
      (mirror) => JSON.stringify(mirror.lastChange ?? 0).length,
    );
  }

  /** Registers a handler for a §6 notification; returns the function that removes it. */
  on<N extends NotificationName>(name: N, handler: (value: NotificationValue<N>) => void): () => void {
    let set = this.#handlers.get(name);
    if (!set) {
      set = new Set();
      this.#handlers.set(name, set);
    }
    const h = handler as Handler;
    set.add(h);
    return () => {
      set.delete(h);
    };
  }

  /** `session.prompt`, exactly once: the same `clientMessageId` (generated if missing) is reused on every resend. */
  prompt(params: PromptParams, options?: CallOptions): Promise<ResultOf<"session.prompt">> {
    const clientMessageId = params.clientMessageId ?? newClientMessageId();
    return this.call("session.prompt", { ...params, clientMessageId }, options);
  }

  /** `session.list`. */
  list(params: ParamsOf<"session.list"> = {}, options?: CallOptions): Promise<ResultOf<"session.list">> {
    return this.call("session.list", params, options);
  }

  /** `session.page`, its events typed by their `type` as `follow` gives them. */
  page(params: ParamsOf<"session.page">, options?: CallOptions): Promise<SessionPage> {
    return this.call("session.page", params, options) as Promise<SessionPage>;
  }

  /** `session.create`. */
  create(
    params: ParamsOf<"session.create"> = {},
    options?: CallOptions,
  ): Promise<ResultOf<"session.create">> {
    return this.call("session.create", params, options);
  }

  /** Skips the rest of a backoff wait, or leaves `unauthorized`/`rejected`/`incompatible`, and connects now (a "retry now" button). */
  reconnectNow(): void {
    this.#connection.reconnectNow();
  }

  /**
   * Uses a new token for every later connect and leaves the `unauthorized` state at once;
   * supervised streams (`followSession`, `controlMirror`) resume on the new socket. A connect
   * still in flight with the old token is tried again with this one if the host refuses it.
   */
  setToken(token: string): void {
    this.#connection.setToken(token);
  }

  /** Stops reconnecting, closes the socket and waits until no timer or socket is left. */
  async close(): Promise<void> {
    this.#handlers.clear();
    await this.#connection.close();
    this.#errors$.complete();
  }
}

/** A fresh id for `session.prompt`, in the id alphabet of §1. */
export function newClientMessageId(): string {
  // randomUUID exists only in secure contexts; a console opened over plain http on a LAN address
  // still has getRandomValues.
  const crypto = globalThis.crypto;
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Why a call may have had no answer, for the `timeout` message. */
function describeState(state: ConnectionState, sent: boolean): string {
  switch (state.name) {
    case "open":
      // not sent: the socket opened past the deadline, before its timer could run
      return sent ? "the socket is open; the host did not answer" : "the socket opened only after it";
    case "backoff":
      return `the host is unreachable; reconnect attempt ${state.attempt} pending`;
    case "connecting":
      return "still connecting to the host";
    default:
      return `connection ${state.name}`;
  }
}

function defaultOnError(error: SessionmuxError): void {
  console.warn(`sessionmux client: ${error.code}: ${error.message}`);
}

function defaultWebSocket(): WebSocketConstructor {
  const ws = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!ws) throw new TypeError("no global WebSocket: pass options.WebSocket or use createNodeClient");
  return ws;
}

/** Creates a client and starts connecting at once; the socket stays open with zero streams. */
export function createClient(options: ClientOptions): SessionmuxClient {
  return new SessionmuxClient(options);
}
