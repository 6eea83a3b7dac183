import { once } from "node:events";
import WebSocket from "ws";
import { type DecodeLimits, decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { type SessionEvent, SessionmuxError, SUBPROTOCOL, type WireError } from "../../protocol/index.js";
import { encodeBearerSubprotocol } from "../../src/transport/auth.js";
import { rawDataBytes } from "../../src/transport/mux/raw-data.js";
import { until } from "./until.js";

/** A decoded host frame, loosely typed: tests assert its shape themselves. */
export interface PeerFrame {
  type: string;
  id?: number;
  value?: unknown;
  error?: WireError;
  name?: string;
  [key: string]: unknown;
}

export interface MuxPeerOptions {
  /** Sent as `Authorization: Bearer`. */
  token?: string;
  /** Sent as a `bearer.` subprotocol entry instead of a header. */
  subprotocolToken?: string;
  /** @default ["sessionmux.v1"] plus the bearer entry */
  protocols?: string[];
  headers?: Record<string, string>;
  /** @default true; false leaves pings unanswered (a dead peer). */
  autoPong?: boolean;
  /** Path and query appended to the origin of `url`. */
  path?: string;
  /**
   * @default true; false keeps no `events` items (only their last seq and any order violations),
   * for load tests that measure the memory of the process they run in.
   */
  keepEvents?: boolean;
  /**
   * @default strings of 16 MiB, arrays of 1,000,000, other limits as the host's — the decoder's
   * limits for host frames; a test that receives a large attachment whole raises `maxBinBytes`.
   */
  decodeLimits?: Partial<DecodeLimits>;
  /** @default `ws`'s 100 MiB — the largest message the socket takes. */
  maxPayload?: number;
}

/** Wide enough for any frame a host sends: a page of events is far more than a client frame's values. */
export const HOST_FRAME_LIMITS: Partial<DecodeLimits> = {
  maxStrBytes: 16 * 1024 * 1024,
  maxArrayLength: 1_000_000,
  maxValues: 2 ** 25,
};

/**
 * A raw protocol peer for tests: speaks protocol-v1 frames over a real `ws` socket and keeps every
 * frame it received, per id, so a test can assert exact sequences.
 */
export class MuxPeer {
  readonly ws: WebSocket;
  readonly frames: PeerFrame[] = [];
  readonly #byId = new Map<number, PeerFrame[]>();
  readonly #lastSeq = new Map<number, number>();
  readonly #violations: string[] = [];
  #keepEvents = true;
  #nextId = 1;
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(ws: WebSocket, decodeLimits: Partial<DecodeLimits>) {
    this.ws = ws;
    this.closed = new Promise((resolve) => {
      ws.on("close", (code, reason) => resolve({ code, reason: reason.toString() }));
    });
    ws.on("message", (data, isBinary) => {
      if (!isBinary) throw new Error("host sent a text frame");
      const frame = decodeFrame(rawDataBytes(data), decodeLimits) as PeerFrame;
      if (typeof frame.id === "number") this.#track(frame.id, frame);
      if (!this.#keepEvents && frame.type === "item" && (frame.value as { kind?: string }).kind === "events")
        return;
      this.frames.push(frame);
      if (typeof frame.id === "number") {
        const list = this.#byId.get(frame.id);
        if (list) list.push(frame);
        else this.#byId.set(frame.id, [frame]);
      }
    });
    ws.on("error", () => {});
  }

  #track(id: number, frame: PeerFrame): void {
    if (frame.type !== "item") return;
    const value = frame.value as { kind?: string; events?: SessionEvent[] };
    if (value.kind === "reset") this.#lastSeq.set(id, 0);
    if (value.kind !== "events" || !value.events) return;
    let last = this.#lastSeq.get(id);
    for (const event of value.events) {
      if (last !== undefined && event.seq !== last + 1)
        this.#violations.push(`stream ${id}: seq ${event.seq} after ${last}`);
      last = event.seq;
    }
    if (last !== undefined) this.#lastSeq.set(id, last);
  }

  /** Events that did not continue their stream's previous seq (a gap, duplicate or reorder). */
  get violations(): readonly string[] {
    return this.#violations;
  }

  /** Connects and waits for `hello`. */
  static async connect(wsUrl: string, options: MuxPeerOptions = {}): Promise<MuxPeer> {
    const ws = MuxPeer.socket(wsUrl, options);
    const peer = new MuxPeer(
      ws,
      options.decodeLimits ? { ...HOST_FRAME_LIMITS, ...options.decodeLimits } : HOST_FRAME_LIMITS,
    );
    peer.#keepEvents = options.keepEvents ?? true;
    await once(ws, "open");
    await until(() => peer.frames.length > 0, 10_000, "hello");
    return peer;
  }

  /** Starts an upgrade without waiting: for tests of refused upgrades. */
  static socket(wsUrl: string, options: MuxPeerOptions = {}): WebSocket {
    const protocols = options.protocols ?? [SUBPROTOCOL];
    const headers: Record<string, string> = { ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    const all =
      options.subprotocolToken !== undefined
        ? [...protocols, encodeBearerSubprotocol(options.subprotocolToken)]
        : protocols;
    const url = options.path
      ? new URL(options.path, wsUrl.replace(/^ws/, "http")).href.replace(/^http/, "ws")
      : wsUrl;
    return new WebSocket(url, all, {
      headers,
      autoPong: options.autoPong ?? true,
      perMessageDeflate: false,
      ...(options.maxPayload === undefined ? {} : { maxPayload: options.maxPayload }),
    });
  }

  get hello(): PeerFrame {
    const first = this.frames[0];
    if (!first) throw new Error("no hello yet");
    return first;
  }

  nextId(): number {
    return this.#nextId++;
  }

  send(frame: unknown): void {
    this.ws.send(encodeFrame(frame), { binary: true });
  }

  sendRaw(data: Uint8Array | string, binary = true): void {
    this.ws.send(data, { binary });
  }

  /** A unary call; resolves with `value`, rejects with the SessionmuxError of an `error` frame. */
  async call<T = unknown>(method: string, params?: unknown, timeoutMs = 20_000): Promise<T> {
    const id = this.nextId();
    this.send(params === undefined ? { type: "call", id, method } : { type: "call", id, method, params });
    const answer = await until(
      () => this.of(id).find((f) => f.type === "result" || f.type === "error"),
      timeoutMs,
      `answer to ${method}`,
    );
    if (answer.type === "error" && answer.error) throw SessionmuxError.fromWire(answer.error);
    return answer.value as T;
  }

  /** Sends a call and returns the error code it got (throws if it succeeded). */
  async callError(method: string, params?: unknown): Promise<SessionmuxError> {
    try {
      await this.call(method, params);
    } catch (err) {
      if (err instanceof SessionmuxError) return err;
      throw err;
    }
    throw new Error(`${method} succeeded`);
  }

  open(method: string, params?: unknown, id = this.nextId()): number {
    this.send(params === undefined ? { type: "open", id, method } : { type: "open", id, method, params });
    return id;
  }

  follow(sessionId: string, cursor: { afterSeq?: number; epoch?: string } = {}): number {
    const id = this.nextId();
    this.#lastSeq.set(id, cursor.afterSeq ?? 0);
    return this.open("session.follow", { sessionId, ...cursor }, id);
  }

  close(id: number): void {
    this.send({ type: "close", id });
  }

  /** Every frame received for `id`, in order. */
  of(id: number): PeerFrame[] {
    return this.#byId.get(id) ?? [];
  }

  items<T = Record<string, unknown>>(id: number): T[] {
    return this.of(id)
      .filter((f) => f.type === "item")
      .map((f) => f.value as T);
  }

  /** The events a follow stream delivered, flattened in arrival order. */
  events(id: number): SessionEvent[] {
    return this.items<{ kind: string; events?: SessionEvent[] }>(id).flatMap((item) =>
      item.kind === "events" ? (item.events ?? []) : [],
    );
  }

  /** The seq of the newest event `id` delivered (its `afterSeq` before any; 0 right after a reset). */
  lastSeq(id: number): number {
    return this.#lastSeq.get(id) ?? 0;
  }

  /** The terminal frame (`end` or `error`) of `id`, once it arrived. */
  terminal(id: number): PeerFrame | undefined {
    return this.of(id).find((f) => f.type === "end" || f.type === "error");
  }

  async waitTerminal(id: number, timeoutMs = 10_000): Promise<PeerFrame> {
    return until(() => this.terminal(id), timeoutMs, `end or error of ${id}`);
  }

  async waitItem<T = Record<string, unknown>>(
    id: number,
    match: (item: T) => boolean,
    timeoutMs = 10_000,
  ): Promise<T> {
    return until(() => this.items<T>(id).find(match), timeoutMs, `item on ${id}`);
  }

  async waitSeq(id: number, seq: number, timeoutMs = 20_000): Promise<void> {
    await until(() => this.lastSeq(id) >= seq, timeoutMs, `seq ${seq} on ${id}`);
  }

  /** Errors that could not be tied to an id. */
  unidentifiedErrors(): WireError[] {
    return this.frames
      .filter((f) => f.type === "error" && f.id === undefined)
      .map((f) => f.error as WireError);
  }

  async waitUnidentifiedError(count: number, timeoutMs = 10_000): Promise<WireError> {
    return until(() => this.unidentifiedErrors()[count - 1], timeoutMs, `unidentified error #${count}`);
  }

  notifications(): PeerFrame[] {
    return this.frames.filter((f) => f.type === "event");
  }

  /** Stops reading from the TCP socket: the host's writes back up. */
  pause(): void {
    this.ws.pause();
  }

  resume(): void {
    this.ws.resume();
  }

  async disconnect(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    this.ws.terminate();
    await this.closed;
  }
}
