import type { SessionEvent } from "../../protocol/index.js";
import { applyEvents, emptyTranscript, type TranscriptState } from "../../protocol/transcript.js";
import type { FollowUpdate } from "../../src/client/index.js";
import type { ConsoleLink } from "./console-link.js";
import { RetryWait } from "./retry-wait.js";
import type { SessionCache } from "./session-cache.js";

/**
 * Where the transcript of the shown session comes from right now; `stopped`: the host ended its
 * follow stream with an error, and it is opened again after a wait (`error` says why).
 */
export type FeedMode = "loading" | "replaying" | "live" | "stopped" | "gone";

const PAGE_LIMIT = 1000;
/** A load superseded this many times in a row gives up and leaves the work to `follow`. */
const MAX_LOAD_RESTARTS = 5;
const SAVE_DELAY_MS = 300;

/**
 * One session as the console shows it: the applied log prefix, the transcript folded from it by
 * the shared reducer, and the follow stream that extends it.
 *
 * `version` counts the operator's own changes (send, edit, clear, delete, rename). Every fetch
 * notes the version before it awaits and drops its answer if the version moved meanwhile, so a
 * slow read can never paint an older state over the newer one.
 */
export class SessionModel {
  transcript: TranscriptState = emptyTranscript();
  mode: FeedMode = "loading";
  epoch: string | undefined;
  error: string | undefined;
  private events: SessionEvent[] = [];
  private version = 0;
  private disposed = false;
  private unfollow: (() => void) | undefined;
  private saveTimer: ReturnType<typeof setTimeout> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly retryWait = new RetryWait();

  constructor(
    readonly sessionId: string,
    private readonly link: ConsoleLink,
    private readonly cache: SessionCache,
    private readonly onChange: () => void,
  ) {}

  /** Paints the cached transcript as soon as it is read, then resumes; without one, rebuilds. */
  start(): void {
    void this.open();
  }

  private async open(): Promise<void> {
    const version = this.version;
    const cached = await this.cache.load(this.sessionId).catch(() => undefined);
    if (this.disposed) return;
    // Changed by the operator meanwhile (sent, cleared): the cached prefix may be out of date.
    if (cached && cached.events.length > 0 && version === this.version) {
      this.events = cached.events;
      this.epoch = cached.epoch;
      this.transcript = applyEvents(emptyTranscript(), cached.events);
      this.mode = "replaying";
      this.onChange();
      this.follow();
      return;
    }
    void this.rebuild();
  }

  /** The operator changed this session: answers of reads already in flight are now stale. */
  touch(): void {
    this.version += 1;
  }

  /** After `session.clear`: forget the log; the follow stream's `reset` brings the new one. */
  cleared(): void {
    this.touch();
    void this.cache.forget(this.sessionId);
  }

  /** After `session.delete`: nothing of it may be written back. */
  deleted(): void {
    this.touch();
    void this.cache.forget(this.sessionId);
    this.mode = "gone";
    this.dispose();
  }

  dispose(): void {
    if (this.disposed) return;
    if (this.mode !== "gone") this.flush();
    this.disposed = true;
    clearTimeout(this.retryTimer);
    this.unfollow?.();
    this.unfollow = undefined;
  }

  /** Writes the cache now (page hide) instead of after the debounce. */
  flush(): void {
    if (this.saveTimer !== undefined) clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    if (this.disposed || this.mode === "gone" || this.epoch === undefined || this.events.length === 0) return;
    void this.cache.save(this.sessionId, { epoch: this.epoch, events: this.events });
  }

  private async rebuild(): Promise<void> {
    for (let attempt = 0; attempt < MAX_LOAD_RESTARTS; attempt++) {
      const version = this.version;
      const fresh = () => !this.disposed && version === this.version;
      const events: SessionEvent[] = [];
      let epoch: string | undefined;
      try {
        for (;;) {
          const page = await this.link.page(this.sessionId, events.length, PAGE_LIMIT);
          if (!fresh()) break;
          if (epoch !== undefined && page.epoch !== epoch) break;
          epoch = page.epoch;
          for (const e of page.events) if (e.seq === events.length + 1) events.push(e as SessionEvent);
          if (!page.hasMore || page.events.length === 0) break;
        }
      } catch (error) {
        if (!fresh()) continue;
        this.fail(error);
        return;
      }
      if (!fresh() || epoch === undefined) {
        if (this.disposed) return;
        continue;
      }
      this.events = events;
      this.epoch = epoch;
      this.transcript = applyEvents(emptyTranscript(), events);
      this.mode = "replaying";
      this.scheduleSave();
      this.onChange();
      this.follow();
      return;
    }
    // Superseded again and again: let follow replay from the start instead.
    if (!this.disposed) this.follow();
  }

  private follow(): void {
    if (this.disposed || this.unfollow) return;
    this.unfollow = this.link.follow(
      this.sessionId,
      { afterSeq: this.events.length, ...(this.epoch !== undefined ? { epoch: this.epoch } : {}) },
      (update) => this.apply(update),
      (error) => this.fail(error),
    );
  }

  private apply(update: FollowUpdate): void {
    if (this.disposed) return;
    switch (update.kind) {
      case "opened":
        this.epoch ??= update.epoch;
        if (this.mode !== "live" || update.headSeq > this.events.length) this.mode = "replaying";
        break;
      case "reset":
        this.epoch = update.epoch;
        this.events = [];
        this.transcript = emptyTranscript();
        this.mode = "replaying";
        break;
      case "events":
        for (const e of update.events) if (e.seq === this.events.length + 1) this.events.push(e);
        this.transcript = applyEvents(this.transcript, update.events);
        this.scheduleSave();
        break;
      case "caughtUp":
        this.mode = "live";
        this.error = undefined;
        this.retryWait.reset();
        break;
      case "interrupted":
        // the stream is lost: what follows is a replay from the cursor, live only at its caughtUp
        if (this.mode === "live") this.mode = "replaying";
        break;
    }
    this.onChange();
  }

  private fail(error: unknown): void {
    if (this.disposed) return;
    // the stream is over: nothing follows the session until it is opened again
    this.unfollow = undefined;
    const code = (error as { code?: string }).code;
    if (code === "session_not_found" || code === "session_retired") {
      void this.cache.forget(this.sessionId);
      this.mode = "gone";
    } else {
      // never "live" over a stream that ended; it resumes from the last seq applied
      this.mode = "stopped";
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        this.follow();
      }, this.retryWait.next());
    }
    this.error = code ?? (error instanceof Error ? error.message : String(error));
    this.onChange();
  }

  private scheduleSave(): void {
    if (this.saveTimer !== undefined) return;
    this.saveTimer = setTimeout(() => this.flush(), SAVE_DELAY_MS);
  }
}
