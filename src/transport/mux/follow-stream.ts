import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { type ParamsOf, SessionmuxError, toSessionmuxError } from "../../../protocol/index.js";
import type { HostApi } from "../../host/host-api.js";
import type { Principal } from "../../host/principal.js";
import type { SessionReadHandle } from "../../host/session-read-handle.js";
import { refusal } from "../../host/store-outcomes.js";
import type { CommitNotice } from "../../store/session-store.js";
import type { HostMetrics } from "../metrics.js";
import { EVENTS_VALUE_ENVELOPE, encodedEventsItems } from "./encoded-events.js";
import { eventItemPieces } from "./event-item-pieces.js";
import { buffersNotices, type FollowState, type FollowTrigger, nextFollowState } from "./follow-state.js";
import type { LogReadGate } from "./log-read-gate.js";
import type { MuxStream, StreamOutlet } from "./stream-outlet.js";

type EncodedRead = Awaited<ReturnType<SessionReadHandle["readAfterEncoded"]>>;

/** The events of one committed append or create, as its notice carries them. */
type CommittedEvents = Extract<CommitNotice, { kind: "append" | "create" }>;

/**
 * A log read serves up to this many `events` items (of `replayBatch` events each) before the
 * stream yields to other sockets, while its items stay under `READ_BUDGET_BYTES`: the high-water
 * check runs before every read, so a slow socket holds at most one read beyond its mark.
 */
const MAX_ITEMS_PER_READ = 8;
const READ_BUDGET_BYTES = 1024 * 1024;

/**
 * A log read the store failed retryably (`persistence_failure`: a PostgreSQL connection lost,
 * which the pool replaces) is tried again after this wait, doubling up to `READ_RETRY_MAX_MS`, for
 * at most the stream's `readRetryMs` since the first failure in a row: a client takes that error
 * as the end of the stream, so the stream sends it only once that is over. The open's read (the
 * session's header and head) is tried the same way: nothing is sent while it waits, so the stream
 * is open and quiet, as before the first item of any replay, and a follower opened during a
 * database blip goes on once the database answers. Each wait is between half and all of its step,
 * at random: the streams a blip failed together do not all read again at the same moments.
 */
const READ_RETRY_FIRST_MS = 250;
const READ_RETRY_MAX_MS = 5000;

export interface FollowContext {
  readonly host: HostApi;
  readonly principal: Principal;
  readonly outlet: StreamOutlet;
  /** Events per `events` item during replay. */
  readonly replayBatch: number;
  /** Socket backlog above which live pushes pause. */
  readonly highWaterBytes: number;
  /**
   * How long failed reads (the open's, the log's) are retried before the stream ends with their
   * `persistence_failure` (the time since the first failure in a row).
   */
  readonly readRetryMs: number;
  readonly metrics: HostMetrics | undefined;
  readonly logInternal: (err: unknown, context: string) => void;
  /** The socket's reads of logs, each with its sending, one at a time while its backlog allows. */
  readonly logReads: LogReadGate;
}

/**
 * One `session.follow` stream (protocol-v1 §5). The commit listener is installed before anything
 * is read, so a commit made during a read is either in the read or in the buffer; the buffer is
 * only ever used to continue the last sent seq, and any doubt (a gap, a clear, an overflowing
 * buffer) is settled by reading the log again. A paused follower costs its socket's backlog and
 * a cursor, nothing more: it is served from the log once the socket drains. So does one waiting
 * for its turn to read (the socket's `LogReadGate`, which waits for the backlog to drain): its
 * read, issued later, holds whatever commits meanwhile, so the buffer keeps notices only from the
 * moment a read is issued.
 */
export class FollowStream implements MuxStream {
  readonly #ctx: FollowContext;
  readonly #sessionId: string;
  readonly #params: ParamsOf<"session.follow">;
  readonly #wake = () => this.#onDrained();
  #state: FollowState = "opening";
  #epoch = "";
  #lastSent = 0;
  #caughtUpSent = false;
  #pending: CommitNotice[] = [];
  #pendingEvents = 0;
  #pendingOverflow = false;
  /**
   * A log read is issued and its commits not yet taken from the buffer. Unset while the stream
   * waits for its turn to read: a stream of a socket that stopped reading waits as long as the
   * peer likes, and kept every commit of its session meanwhile (up to `replayBatch` × 4 events of
   * any size), though its read would hold them all.
   */
  #readIssued = false;
  #pumping = false;
  /** Events per log read: one item at first, more while the events read so far are small. */
  #readLimit: number;
  #unsubscribe: (() => void) | undefined;
  #reader: SessionReadHandle | undefined;
  /** The wait before a failed log read is tried again; `stop` ends it early. */
  #retryWait: { timer: ReturnType<typeof setTimeout>; done: () => void } | undefined;

  constructor(ctx: FollowContext, params: ParamsOf<"session.follow">) {
    this.#ctx = ctx;
    this.#params = params;
    this.#sessionId = params.sessionId;
    this.#readLimit = ctx.replayBatch;
  }

  get state(): FollowState {
    return this.#state;
  }

  async start(): Promise<void> {
    const { outlet } = this.#ctx;
    try {
      const reader = await this.#openReader();
      if (!reader) return;
      this.#reader = reader;
      // Listener before read: whatever commits from here on is either in a log read or a notice.
      this.#unsubscribe = reader.subscribe((notice) => this.#onNotice(notice));
      const head = { header: reader.header, headSeq: reader.headSeq };
      const epoch = head.header.epoch;
      const afterSeq = this.#params.afterSeq ?? 0;
      outlet.item({ kind: "opened", epoch, headSeq: head.headSeq });
      this.#epoch = epoch;
      if (this.#params.epoch !== undefined && this.#params.epoch !== epoch) {
        outlet.item({ kind: "reset", epoch });
        this.#lastSent = 0;
      } else if (afterSeq > head.headSeq) {
        return this.#fail(
          new SessionmuxError(
            "cursor_ahead",
            `afterSeq ${afterSeq} is past the head ${head.headSeq}; follow from the head`,
            {
              data: { afterSeq, headSeq: head.headSeq, epoch },
            },
          ),
        );
      } else {
        this.#lastSent = afterSeq;
      }
      this.#to("opened");
      await this.#pump();
    } catch (err) {
      this.#fail(err);
    }
  }

  stop(): void {
    this.#cleanup();
  }

  /** The session's read handle, its failed tries retried as a log read's; undefined once ended. */
  async #openReader(): Promise<SessionReadHandle | undefined> {
    const { host, principal } = this.#ctx;
    const retries = new ReadRetries();
    for (;;) {
      try {
        const reader = await host.openRead(principal, this.#sessionId);
        return this.#ended() ? undefined : reader;
      } catch (err) {
        if (this.#ended() || !(await this.#retried(err, retries))) throw err;
        if (this.#ended()) return undefined;
      }
    }
  }

  /** Re-checked after every await: the stream may have been closed meanwhile. */
  #ended(): boolean {
    return this.#state === "ended";
  }

  #onNotice(notice: CommitNotice): void {
    try {
      const state = this.#state;
      if (state === "ended") return;
      if (notice.kind === "delete") this.#fail(refusal(this.#sessionId, { status: "retired" }));
      else if (buffersNotices(state)) this.#buffer(notice);
      else if (state !== "live" || notice.kind === "meta") return;
      else if (notice.kind === "clear" || notice.epoch !== this.#epoch) this.#catchUp();
      else if (this.#ctx.outlet.writer.buffered > this.#ctx.highWaterBytes) this.#pause();
      else if (!this.#pushContiguous(notice)) this.#catchUp();
    } catch (err) {
      this.#fail(err);
    }
  }

  #buffer(notice: CommitNotice): void {
    if (this.#pendingOverflow || !this.#readIssued) return;
    const size = notice.kind === "append" || notice.kind === "create" ? notice.events.length : 1;
    this.#pendingEvents += size;
    if (this.#pendingEvents > this.#ctx.replayBatch * 4) {
      // The log holds all of it; the next read serves it without buffering it twice.
      this.#pending = [];
      this.#pendingOverflow = true;
      return;
    }
    this.#pending.push(notice);
  }

  /** Reads the log from the last sent seq until the head, then continues with buffered commits. */
  async #pump(): Promise<void> {
    if (this.#pumping) return;
    this.#pumping = true;
    let firstRead = true;
    const retries = new ReadRetries();
    try {
      for (;;) {
        if (this.#state !== "replaying" && this.#state !== "catchingUp") return;
        if (this.#ctx.outlet.writer.buffered > this.#ctx.highWaterBytes) return this.#pause();
        // Everything committed before this read is issued is visible to it or to a later page.
        this.#pending = [];
        this.#pendingEvents = 0;
        this.#pendingOverflow = false;
        this.#readIssued = false;
        const readLimit = this.#readLimit;
        const reader = this.#reader;
        if (!reader) return;
        let read: EncodedRead | undefined;
        try {
          read = await this.#ctx.logReads.run(() => this.#readAndSend(reader, readLimit, firstRead));
        } catch (err) {
          // the cursor stays where the last sent event left it; commits made meanwhile are buffered
          // as during any read, and the next read covers whatever the buffer dropped
          if (this.#ended() || !(await this.#retried(err, retries))) throw err;
          continue;
        }
        retries.succeeded();
        if (read === undefined || this.#ended()) return;
        firstRead = false;
        if (read.epoch !== this.#epoch) {
          this.#epoch = read.epoch;
          this.#lastSent = 0;
          // the new log is replayed from seq 1: its end is announced like the first replay's, so a
          // reader that dropped its mirror on `reset` learns when it is watching again
          this.#caughtUpSent = false;
          this.#ctx.outlet.item({ kind: "reset", epoch: read.epoch });
          continue;
        }
        // a read of large events ends at its byte budget before `readLimit`: the head it read
        // with the events tells whether the log goes on (an empty read never loops here)
        if (read.count >= readLimit || (read.count > 0 && read.lastSeq < read.headSeq)) {
          await yieldToEventLoop();
          continue;
        }
        if (!this.#continueWithBuffered()) continue;
        if (!this.#caughtUpSent) {
          this.#caughtUpSent = true;
          this.#ctx.outlet.item({ kind: "caughtUp", seq: this.#lastSent });
        }
        this.#to("reachedHead");
        return;
      }
    } catch (err) {
      this.#fail(err);
    } finally {
      this.#pumping = false;
    }
  }

  /**
   * One read of the log from the cursor and, in the epoch the stream is in, the sending of its
   * events, done together under the socket's backlog gate so the next read waits for what this one
   * sent; undefined when the stream ended before its turn came.
   */
  async #readAndSend(
    reader: SessionReadHandle,
    readLimit: number,
    firstRead: boolean,
  ): Promise<EncodedRead | undefined> {
    if (this.#ended()) return undefined;
    this.#readIssued = true;
    const read = await reader.readAfterEncoded(
      this.#lastSent,
      readLimit,
      this.#ctx.replayBatch,
      EVENTS_VALUE_ENVELOPE,
    );
    if (this.#ended()) return undefined;
    if (firstRead && this.#state === "catchingUp")
      this.#ctx.metrics?.followerLag.observe(read.headSeq - this.#lastSent);
    if (read.epoch !== this.#epoch || read.count === 0) return read;
    let bytes = 0;
    for (const value of read.arrays) {
      this.#sendShared(value);
      bytes += value.length;
    }
    this.#lastSent = read.lastSeq;
    this.#readLimit = nextReadLimit(this.#ctx.replayBatch, bytes / read.count);
    return read;
  }

  /**
   * Waits before the next try of a read that failed with `err`, and says whether to try: only a
   * failure the store marks retryable, while the failures in a row are younger than the bound.
   */
  async #retried(err: unknown, retries: ReadRetries): Promise<boolean> {
    const error = toSessionmuxError(err);
    if (error.code !== "persistence_failure" || !error.retryable) return false;
    const waitMs = retries.next(Date.now(), this.#ctx.readRetryMs);
    if (waitMs === undefined) return false;
    await this.#waitBeforeRetry(waitMs);
    return true;
  }

  #waitBeforeRetry(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.#retryWait = undefined;
        resolve();
      };
      this.#retryWait = { timer: setTimeout(done, ms), done };
    });
  }

  /** Sends the buffered commits that continue the last sent seq; false if the log must be read. */
  #continueWithBuffered(): boolean {
    const pending = this.#pending;
    const overflow = this.#pendingOverflow;
    this.#pending = [];
    this.#pendingEvents = 0;
    this.#pendingOverflow = false;
    const continued = this.#ctx.metrics?.followContinuations;
    if (overflow) return this.#readAgain();
    for (const notice of pending) {
      if (notice.kind === "meta" || notice.kind === "delete") continue;
      if (notice.kind === "clear") {
        if (notice.epoch === this.#epoch) continue;
        return false;
      }
      const before = this.#lastSent;
      if (notice.epoch !== this.#epoch || !this.#pushContiguous(notice)) return this.#readAgain();
      continued?.inc({ path: this.#lastSent > before ? "buffered" : "overlap" });
    }
    return true;
  }

  /** The buffered commits do not continue the read (a gap, or too many of them): read the log again. */
  #readAgain(): false {
    this.#ctx.metrics?.followContinuations.inc({ path: "gap" });
    return false;
  }

  /** Sends the part of a committed batch after the last sent seq; false on a gap. */
  #pushContiguous(batch: CommittedEvents): boolean {
    const { events } = batch;
    const first = events[0];
    const last = events[events.length - 1];
    if (!first || !last || last.seq <= this.#lastSent) return true;
    if (first.seq === this.#lastSent + 1) {
      for (const item of encodedEventsItems(events, batch.stored)) this.#sendShared(item);
      this.#lastSent = last.seq;
      return true;
    }
    if (first.seq > this.#lastSent + 1) return false;
    const rest = events.filter((e) => e.seq > this.#lastSent);
    for (const item of encodedEventsItems(rest))
      for (const piece of eventItemPieces(item)) this.#ctx.outlet.itemEncoded(piece);
    this.#lastSent = last.seq;
    return true;
  }

  /** An `events` value others send too, as items a client can take each within its keepalive wait. */
  #sendShared(value: Uint8Array): void {
    for (const piece of eventItemPieces(value)) this.#ctx.outlet.itemShared(piece);
  }

  #catchUp(): void {
    if (this.#to("gap")) void this.#pump();
  }

  #pause(): void {
    if (this.#to("highWater")) this.#ctx.outlet.writer.onDrain(this.#wake);
  }

  #onDrained(): void {
    if (this.#to("drained")) void this.#pump();
  }

  #to(trigger: FollowTrigger): boolean {
    const next = nextFollowState(this.#state, trigger);
    if (next === undefined) return false;
    const slow = this.#ctx.metrics?.slowFollowers;
    if (this.#state === "paused") slow?.dec();
    if (next === "paused") slow?.inc();
    this.#state = next;
    return true;
  }

  #fail(err: unknown): void {
    if (this.#ended()) return;
    const error = toSessionmuxError(err);
    if (error.code === "internal_error") this.#ctx.logInternal(err, `session.follow ${this.#sessionId}`);
    this.#cleanup();
    this.#ctx.outlet.fail(error);
  }

  #cleanup(): void {
    this.#to("finish");
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    this.#ctx.outlet.writer.cancelDrain(this.#wake);
    this.#pending = [];
    const wait = this.#retryWait;
    if (wait) {
      clearTimeout(wait.timer);
      wait.done();
    }
  }
}

/** The failed reads in a row of one stream: when the first failed, and the wait before the next try. */
class ReadRetries {
  #since: number | undefined;
  #waitMs = READ_RETRY_FIRST_MS;

  /** The wait before the next try, or undefined once the failures lasted `boundMs`. */
  next(now: number, boundMs: number): number | undefined {
    const since = this.#since ?? now;
    this.#since = since;
    const left = since + boundMs - now;
    if (left <= 0) return undefined;
    const waitMs = Math.min(Math.round(this.#waitMs * (0.5 + Math.random() / 2)), left);
    this.#waitMs = Math.min(this.#waitMs * 2, READ_RETRY_MAX_MS);
    return waitMs;
  }

  succeeded(): void {
    this.#since = undefined;
    this.#waitMs = READ_RETRY_FIRST_MS;
  }
}

/** Whole items of `replayBatch` events, as many as fit the budget at `bytesPerEvent`, at least one. */
function nextReadLimit(replayBatch: number, bytesPerEvent: number): number {
  const items = Math.floor(READ_BUDGET_BYTES / Math.max(1, bytesPerEvent * replayBatch));
  return replayBatch * Math.min(MAX_ITEMS_PER_READ, Math.max(1, items));
}
