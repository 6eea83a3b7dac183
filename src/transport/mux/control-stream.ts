import { Limits, SessionmuxError, toSessionmuxError } from "../../../protocol/index.js";
import type { HostApi } from "../../host/host-api.js";
import type { ControlDelta } from "../../host/live/live-state.js";
import type { Principal } from "../../host/principal.js";
import type { BaselineGate } from "./baseline-gate.js";
import { encodeBaselineParts } from "./baseline-parts.js";
import { controlDeltaWeight } from "./control-delta-weight.js";
import type { MuxStream, StreamOutlet } from "./stream-outlet.js";

export interface ControlContext {
  readonly host: HostApi;
  readonly principal: Principal;
  readonly outlet: StreamOutlet;
  /** Socket backlog above which deltas wait in this stream's queue. */
  readonly highWaterBytes: number;
  /** Deltas allowed to wait; one more ends the stream with `slow_consumer`. */
  readonly maxQueued: number;
  /**
   * What the waiting deltas may weigh (`controlDeltaWeight`); past it the stream ends with
   * `slow_consumer`. A count alone let 5,000 queue snapshots, each with a removed prompt of
   * 60 KB, keep 136 MiB alive for one never-read stream.
   */
  readonly maxQueuedBytes: number;
  /** The socket's baselines, one at a time and only while its backlog allows. */
  readonly baselines: BaselineGate;
  /** The client asked for the baseline in parts (`baselineParts`), else it is one item. */
  readonly baselineParts: boolean;
  readonly logInternal: (err: unknown, context: string) => void;
}

/**
 * One `session.control` stream (protocol-v1 §5). When the socket's turn for a baseline comes
 * (`BaselineGate`): listeners first, then one baseline (in parts, if asked), then the
 * deltas that arrived while it was built (deltas are snapshots or idempotent, so one already in
 * the baseline does no harm), then live deltas. Live state has no durable sequence to replay
 * from, so a reader that falls too far behind is ended with `slow_consumer` and reopens.
 */
export class ControlStream implements MuxStream {
  readonly #ctx: ControlContext;
  readonly #wake = () => this.#flush();
  #state: "building" | "live" | "ended" = "building";
  /** Deltas not yet sent: arrived during the baseline, or held back by a full socket. */
  #queue: ControlDelta[] = [];
  /** The weight of `#queue`. */
  #queuedBytes = 0;
  #unsubscribe: (() => void) | undefined;

  constructor(ctx: ControlContext) {
    this.#ctx = ctx;
  }

  async start(): Promise<void> {
    await this.#ctx.baselines.run(async () => {
      // closed while it waited for its turn: nothing to build
      if (this.#ended) return;
      const { host, principal, outlet } = this.#ctx;
      this.#unsubscribe = host.subscribeControl(principal, (delta) => this.#onDelta(delta));
      try {
        const baseline = await host.controlBaseline(principal);
        // unbounded, a baseline is one part: the single item of a client that did not ask for parts
        const items = await encodeBaselineParts(
          baseline,
          this.#ctx.baselineParts ? Limits.streamItemBytes : Number.POSITIVE_INFINITY,
        );
        if (this.#ended) return;
        // all parts at once: no delta comes between them, so they stay one cut
        for (const item of items) outlet.itemEncoded(item);
        this.#state = "live";
        this.#flush();
      } catch (err) {
        this.#fail(err);
      }
    });
  }

  get #ended(): boolean {
    return this.#state === "ended";
  }

  stop(): void {
    this.#cleanup();
  }

  #onDelta(delta: ControlDelta): void {
    if (this.#state === "ended") return;
    this.#queue.push(delta);
    this.#queuedBytes += controlDeltaWeight(delta);
    if (this.#queue.length > this.#ctx.maxQueued || this.#queuedBytes > this.#ctx.maxQueuedBytes) {
      this.#fail(
        new SessionmuxError(
          "slow_consumer",
          "control reader fell too far behind; reopen session.control for a fresh baseline",
          {
            data: { queued: this.#queue.length, queuedBytes: this.#queuedBytes },
          },
        ),
      );
      return;
    }
    if (this.#state === "live" && this.#queue.length === 1) this.#flush();
  }

  #flush(): void {
    if (this.#state !== "live") return;
    const { outlet, highWaterBytes } = this.#ctx;
    let sent = 0;
    while (sent < this.#queue.length && outlet.writer.buffered <= highWaterBytes) {
      const delta = this.#queue[sent]!;
      outlet.item(delta);
      this.#queuedBytes -= controlDeltaWeight(delta);
      sent++;
    }
    this.#queue = sent === this.#queue.length ? [] : this.#queue.slice(sent);
    if (this.#queue.length > 0) outlet.writer.onDrain(this.#wake);
  }

  #fail(err: unknown): void {
    if (this.#state === "ended") return;
    const error = toSessionmuxError(err);
    if (error.code === "internal_error") this.#ctx.logInternal(err, "session.control");
    this.#cleanup();
    this.#ctx.outlet.fail(error);
  }

  #cleanup(): void {
    this.#state = "ended";
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#queue = [];
    this.#queuedBytes = 0;
    this.#ctx.outlet.writer.cancelDrain(this.#wake);
  }
}
