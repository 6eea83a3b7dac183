import { setMaxListeners } from "node:events";
import type { Socket } from "node:net";
import type WebSocket from "ws";
import { decodeFrame } from "../../../protocol/codec.js";
import {
  type CallMethod,
  type MethodName,
  type ParamsOf,
  PROTOCOL_VERSION,
  SessionmuxError,
  toSessionmuxError,
} from "../../../protocol/index.js";
import type { HostApi } from "../../host/host-api.js";
import type { Principal } from "../../host/principal.js";
import { BaselineGate } from "./baseline-gate.js";
import { CallGate } from "./call-gate.js";
import { type ClientRequest, isRefusal, parseClientFrame } from "./client-frame.js";
import { ControlStream } from "./control-stream.js";
import { DownloadStream } from "./download-stream.js";
import { FollowStream } from "./follow-stream.js";
import { FrameWriter } from "./frame-writer.js";
import { Heartbeat } from "./heartbeat.js";
import { LogReadGate } from "./log-read-gate.js";
import type { MuxOptions } from "./mux-options.js";
import { idOfOverlongStringFrame } from "./overlong-string-frame.js";
import { rawDataBytes } from "./raw-data.js";
import { sharedEventFrames } from "./shared-event-frames.js";
import { type MuxStream, StreamOutlet } from "./stream-outlet.js";
import { trailingBinaryHead } from "./trailing-binary.js";

/**
 * Follow streams of one socket whose log reads (each up to 1 MiB, with its sending) run at once:
 * enough that a tab catching up on many sessions is not one read's round trip per stream, few
 * enough that 256 streams replaying a long log at once hold the host to the backlog plus eight
 * reads, not 256.
 */
const LOG_READS_AT_ONCE = 8;

type InFlight =
  | { kind: "call" }
  | { kind: "stream"; method: MethodName; stream: MuxStream; outlet: StreamOutlet };

/**
 * One mux socket (protocol-v1 §2–§7): validates every frame, routes calls through the host,
 * runs streams, forwards notifications. A failure is answered on the id it concerns and touches
 * nothing else on the socket.
 */
export class MuxConnection {
  readonly writer: FrameWriter;
  readonly #ws: WebSocket;
  readonly #host: HostApi;
  readonly #principal: Principal;
  readonly #options: MuxOptions;
  readonly #inFlight = new Map<number, InFlight>();
  readonly #gate: CallGate;
  /** The socket's control baselines, built one at a time while its backlog allows. */
  readonly #baselines: BaselineGate;
  /** The socket's follow streams' reads of logs, a few at a time while its backlog allows. */
  readonly #logReads: LogReadGate;
  #streams = 0;
  #closed = false;
  #unsubscribeNotifications: (() => void) | undefined;
  readonly #heartbeat: Heartbeat;
  /**
   * Fires when the socket goes: nobody waits for its calls' answers any more. One for all the
   * socket's calls, made at its first: one per call cost every call (a rename, a prompt) an
   * EventTarget that only a search listens to.
   */
  #gone: AbortController | undefined;
  /** Set by `shutDown`: nothing new is taken. */
  #shuttingDown = false;
  /** What `callsAnswered` waits on: called once its socket's last call in flight was answered. */
  #answered: (() => void) | undefined;

  constructor(ws: WebSocket, raw: Socket, host: HostApi, principal: Principal, options: MuxOptions) {
    this.#ws = ws;
    this.#host = host;
    this.#principal = principal;
    this.#options = options;
    this.#heartbeat = new Heartbeat(options.backlogGraceIntervals);
    this.writer = new FrameWriter(ws, raw, options.metrics, options.sendHighWaterBytes);
    this.#gate = new CallGate({
      maxInFlight: options.maxCallsInFlight,
      maxQueued: options.maxQueuedCalls,
      canStart: () => this.writer.buffered <= options.sendHighWaterBytes,
      changed: () => this.#updateReading(),
    });
    this.#baselines = new BaselineGate(this.writer, options.followerHighWaterBytes);
    this.#logReads = new LogReadGate(this.writer, options.followerHighWaterBytes, LOG_READS_AT_ONCE);
    ws.on("message", (data, isBinary) => this.#onMessage(data, isBinary));
    ws.on("pong", (payload) => this.#heartbeat.pong(payload));
    ws.on("ping", () => this.#heartbeat.heard());
    ws.on("error", () => {
      // `ws` closes the socket after an error (1009 over maxPayload, bad framing); 'close' cleans up.
    });
  }

  start(): void {
    this.writer.sendFrame({
      type: "hello",
      protocol: PROTOCOL_VERSION,
      hostId: this.#host.hostId,
      generation: this.#host.generation,
      serverTime: Date.now(),
      maxPayloadBytes: this.#options.maxPayloadBytes,
      maxStrBytes: this.#options.decodeLimits.maxStrBytes,
    });
    this.#unsubscribeNotifications = this.#host.subscribeNotificationLists(this.#principal, (list) => {
      if (this.writer.buffered > this.#options.notificationHighWaterBytes) {
        this.#options.metrics?.notificationsDropped.inc(list.length);
        return;
      }
      this.writer.sendShared(sharedEventFrames(list));
    });
  }

  /** Called every ping interval: pings the peer, or drops it by the rule of `Heartbeat`. */
  heartbeat(): void {
    const backlog = this.writer.buffered;
    const verdict = this.#heartbeat.tick({
      backlog,
      dispatched: this.writer.dispatched,
      // Not reading the socket is then the host's doing (its calls are busy), not the peer's silence.
      holding: this.#ws.isPaused && backlog <= this.#options.sendHighWaterBytes,
    });
    if ("ping" in verdict) {
      // behind everything written before it: its pong says the peer read all of that
      this.writer.writePending();
      this.#ws.ping(verdict.ping);
      return;
    }
    this.#options.metrics?.heartbeatDrops.inc({ reason: verdict.drop });
    this.#ws.terminate();
  }

  /** The socket is gone: free everything without sending. */
  dispose(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unsubscribeNotifications?.();
    this.#gate.clear();
    this.writer.cancelDrain(this.#drained);
    this.#gone?.abort();
    for (const entry of [...this.#inFlight.values()]) {
      if (entry.kind === "stream") {
        entry.stream.stop();
        entry.outlet.release();
      }
    }
    this.#inFlight.clear();
  }

  /**
   * Host shutdown: every open stream ends with `host_shutting_down`, and so does every call or
   * stream sent from now on. The calls in flight go on, so that their answers (a forwarded call's
   * from the session's owner, or what the host's own shutdown answers it) reach the peer before
   * the socket closes: see `callsAnswered`.
   */
  shutDown(): void {
    this.#shuttingDown = true;
    for (const entry of [...this.#inFlight.values()]) {
      if (entry.kind === "stream") {
        entry.stream.stop();
        entry.outlet.fail(
          new SessionmuxError("host_shutting_down", "the host is shutting down; reconnect later"),
        );
      }
    }
    // the close frame that follows must come after them
    this.writer.writePending();
  }

  #onMessage(data: WebSocket.RawData, isBinary: boolean): void {
    this.#heartbeat.heard();
    if (this.#closed) return;
    this.#read(data, isBinary);
    // After every frame, refused ones too: each answer adds to the backlog. Before, a text or
    // undecodable frame left the socket read, so a peer sending them without reading made the
    // host hold its refusals without bound (6.6 MiB of empty text frames: 157 MiB held).
    this.#updateReading();
  }

  #read(data: WebSocket.RawData, isBinary: boolean): void {
    const bytes = rawDataBytes(data);
    const metrics = this.#options.metrics;
    metrics?.framesIn.inc();
    metrics?.bytesIn.inc(bytes.length);
    if (!isBinary) {
      this.#refuse(new SessionmuxError("bad_frame", "frames must be binary MessagePack, not text"));
      return;
    }
    let value: unknown;
    try {
      value = decodeFrame(bytes, this.#options.decodeLimits);
    } catch (err) {
      const inFlight = (id: number) => this.#inFlight.has(id);
      this.#refuse(
        toSessionmuxError(err),
        idOfOverlongStringFrame(bytes, this.#options.decodeLimits, inFlight),
      );
      return;
    }
    const request = parseClientFrame(value, (id) => this.#inFlight.has(id));
    if (isRefusal(request)) this.#refuse(request.refused, request.id);
    else this.#dispatch(request);
  }

  /**
   * Stops reading the socket while calls wait for a slot or the send backlog is above the
   * high-water mark (protocol-v1 §7), and reads again once neither holds: a peer that does not
   * read its answers cannot make the host hold more of them.
   */
  #updateReading(): void {
    if (this.#closed) return;
    const hold = this.#gate.waiting > 0 || this.writer.buffered > this.#options.sendHighWaterBytes;
    if (hold) {
      if (!this.#ws.isPaused) this.#ws.pause();
      if (this.writer.buffered > 0) this.writer.onDrain(this.#drained);
    } else if (this.#ws.isPaused) {
      this.#ws.resume();
    }
  }

  readonly #drained = (): void => this.#gate.pump();

  #goneSignal(): AbortSignal {
    if (!this.#gone) {
      this.#gone = new AbortController();
      // each call waiting on it (a search in line for its turn) listens until it starts: as many as
      // the socket's calls, past EventTarget's warning at 10
      setMaxListeners(0, this.#gone.signal);
    }
    return this.#gone.signal;
  }

  /**
   * Resolves once every call in flight has been answered (its answer handed to the socket), or
   * after `withinMs`: a call still unanswered then is lost with the socket, as on any carrier loss.
   */
  callsAnswered(withinMs: number): Promise<void> {
    if (this.#closed || !this.#callsInFlight()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#answered = undefined;
        this.writer.writePending();
        resolve();
      };
      const timer = setTimeout(done, withinMs);
      timer.unref();
      this.#answered = done;
    });
  }

  #callsInFlight(): boolean {
    for (const entry of this.#inFlight.values()) if (entry.kind === "call") return true;
    return false;
  }

  #dispatch(request: ClientRequest): void {
    if (request.type === "close") {
      this.#closeStream(request.id);
      return;
    }
    if (this.#shuttingDown) {
      this.#refuse(
        new SessionmuxError("host_shutting_down", "the host is shutting down; reconnect shortly"),
        request.id,
      );
      return;
    }
    if (request.type === "call") {
      const { id, method, params } = request;
      this.#inFlight.set(id, { kind: "call" });
      const gone = this.#goneSignal();
      if (!this.#gate.submit(() => this.#call(id, method as CallMethod, params, gone))) {
        this.#inFlight.delete(id);
        this.#refuse(
          new SessionmuxError(
            "overloaded",
            `at most ${this.#options.maxQueuedCalls} calls may wait on one socket; read the answers, then retry`,
            { data: { limit: this.#options.maxQueuedCalls } },
          ),
          id,
        );
      }
      return;
    }
    if (this.#streams >= this.#options.maxStreamsPerSocket) {
      this.#refuse(
        new SessionmuxError(
          "too_many_streams",
          `at most ${this.#options.maxStreamsPerSocket} streams per socket; close one first`,
          { data: { limit: "streams_per_socket", max: this.#options.maxStreamsPerSocket } },
        ),
        request.id,
      );
      return;
    }
    let release: (() => void) | undefined;
    if (request.method === "session.control") {
      try {
        release = this.#options.principalLimits.takeControlStream(this.#principal);
      } catch (err) {
        this.#refuse(toSessionmuxError(err), request.id);
        return;
      }
    }
    this.#open(request.id, request.method, request.params, release);
  }

  async #call(id: number, method: CallMethod, params: unknown, gone: AbortSignal): Promise<void> {
    let release: (() => void) | undefined;
    try {
      if (method === "session.create" || method === "session.fork")
        this.#options.principalLimits.takeSessionCreation(this.#principal);
      if (method === "session.search") release = this.#options.principalLimits.takeSearch(this.#principal);
      if (method === "session.attachment") {
        await this.#sendAttachment(id, params as ParamsOf<"session.attachment">);
        return;
      }
      const value = await this.#host.call(this.#principal, method, params as ParamsOf<typeof method>, gone);
      if (!this.#closed) this.writer.sendFrame({ type: "result", id, value });
    } catch (err) {
      const error = toSessionmuxError(err);
      if (error.code === "internal_error") this.#logInternal(err, method);
      if (!this.#closed) this.writer.sendFrame({ type: "error", id, error: error.toWire() });
    } finally {
      release?.();
      this.#inFlight.delete(id);
      if (this.#answered && !this.#callsInFlight()) this.#answered();
    }
  }

  /**
   * §4 `session.attachment`: the result's head, then the body read from the store chunk by chunk
   * as the socket takes it, as one message (the wire is that of any result). The call keeps its
   * slot until the body is sent.
   */
  async #sendAttachment(id: number, params: ParamsOf<"session.attachment">): Promise<void> {
    const body = await this.#host.openAttachment(this.#principal, "session.attachment", params);
    if (this.#closed) return;
    const { name, type, size } = body;
    const value = { name, type, size, bytes: new Uint8Array(0) };
    const head = trailingBinaryHead({ type: "result", id, value }, size);
    await this.writer.sendStreamed(head, size, () => body.chunks());
  }

  #open(id: number, method: MethodName, params: unknown, release?: () => void): void {
    const metrics = this.#options.metrics;
    const outlet = new StreamOutlet(id, this.writer, () => {
      release?.();
      this.#inFlight.delete(id);
      this.#streams--;
      metrics?.openStreams.dec({ method });
    });
    const host = this.#host;
    const principal = this.#principal;
    const logInternal = this.#logInternal;
    const highWaterBytes = this.#options.followerHighWaterBytes;
    let stream: FollowStream | ControlStream | DownloadStream;
    // Contexts are literals, not spreads of a shared part: a spread gave every context a map of
    // its own, and each follower's reads of it on every commit went through V8's megamorphic path.
    if (method === "session.follow") {
      stream = new FollowStream(
        {
          host,
          principal,
          outlet,
          logInternal,
          replayBatch: this.#options.replayBatch,
          highWaterBytes,
          readRetryMs: this.#options.followReadRetryMs,
          metrics,
          logReads: this.#logReads,
        },
        params as ParamsOf<"session.follow">,
      );
    } else if (method === "session.download") {
      stream = new DownloadStream(
        { host, principal, outlet, logInternal },
        params as ParamsOf<"session.download">,
      );
    } else {
      stream = new ControlStream({
        host,
        principal,
        outlet,
        logInternal,
        highWaterBytes,
        maxQueued: this.#options.controlMaxQueued,
        maxQueuedBytes: this.#options.controlMaxQueuedBytes,
        baselines: this.#baselines,
        baselineParts: (params as ParamsOf<"session.control">).baselineParts === true,
      });
    }
    this.#inFlight.set(id, { kind: "stream", method, stream, outlet });
    this.#streams++;
    metrics?.openStreams.inc({ method });
    stream.start().catch((err: unknown) => {
      this.#logInternal(err, method);
      outlet.fail(toSessionmuxError(err));
    });
  }

  /**
   * `close` of an open stream ends it with `end`. A close naming a call in flight is ignored (its
   * result still comes); a close naming nothing in flight is answered `end`, so closing twice or
   * racing the host's own end is harmless.
   */
  #closeStream(id: number): void {
    const entry = this.#inFlight.get(id);
    if (entry?.kind === "call") return;
    if (entry) {
      entry.stream.stop();
      entry.outlet.end();
      return;
    }
    this.writer.sendFrame({ type: "end", id });
  }

  #refuse(error: SessionmuxError, id?: number): void {
    this.writer.sendFrame(
      id === undefined
        ? { type: "error", error: error.toWire() }
        : { type: "error", id, error: error.toWire() },
    );
  }

  readonly #logInternal = (err: unknown, context: string): void => {
    this.#options.logger.error({ err, context, principal: this.#principal.name }, "mux internal error");
  };
}
