import { applyEvents, emptyTranscript, type TranscriptState } from "../../protocol/transcript.js";
import type { FollowUpdate } from "../../src/client/index.js";
import type { ConsoleLink } from "./console-link.js";
import { LogWindow } from "./log-window.js";
import { RetryWait } from "./retry-wait.js";
import type { SessionCache } from "./session-cache.js";

/**
 * Where the transcript of the shown session comes from right now; `stopped`: the host ended its
 * follow stream with an error, and it is opened again after a wait (`error` says why).
 */
export type FeedMode = "loading" | "replaying" | "live" | "stopped" | "gone";

/** Whether the log goes back further than the transcript shows: `loading` while a page is read. */
export type OlderEvents = "none" | "more" | "loading";

const PAGE_LIMIT = 1000;
/**
 * Pages read back from the tail to find the start of the turn it ends in; a turn longer than
 * this shows from the middle until older pages are asked for.
 */
const MAX_TURN_PAGES = 10;
/** A load superseded this many times in a row gives up and leaves the work to `follow`. */
const MAX_LOAD_RESTARTS = 5;
const SAVE_DELAY_MS = 300;

/**
 * One session as the console shows it: the stretch of its log the tab holds (newest first: a long
 * log paints from its tail, older pages come as the person scrolls up), the transcript folded
 * from it by the shared reducer, and the follow stream that extends it from its last event.
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
  private window = LogWindow.empty();
  private readingOlder = false;
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
      this.window = LogWindow.restore(cached.events, cached.seed);
      this.epoch = cached.epoch;
      this.transcript = this.window.fold();
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
    const { events, seed } = this.window;
    if (this.disposed || this.mode === "gone" || this.epoch === undefined || events.length === 0) return;
    void this.cache.save(this.sessionId, { epoch: this.epoch, events, ...(seed ? { seed } : {}) });
  }

  get older(): OlderEvents {
    return this.window.base === 0 ? "none" : this.readingOlder ? "loading" : "more";
  }

  /**
   * The tab holds the log from inside a turn (one longer than the pages read on open): that
   * turn's prompt and first part are not shown yet.
   */
  get turnStartMissing(): boolean {
    return !this.window.startsClean;
  }

  /**
   * Puts older pages of the log in front of what the tab holds: the next one, or, while the tab
   * holds the log from inside a turn, as many as reach back to that turn's start. Returns the id
   * of that turn once its start is shown (the view brings its prompt into sight). A page of
   * another epoch (the session was cleared meanwhile) is dropped: the follow stream's reset
   * brings the new log.
   */
  async loadOlder(): Promise<string | undefined> {
    const window = this.window;
    const epoch = this.epoch;
    if (this.readingOlder || window.base === 0 || epoch === undefined || this.disposed) return;
    const inTurn = window.startsClean ? undefined : window.base + 1;
    let grew = false;
    this.readingOlder = true;
    this.onChange();
    try {
      do {
        const page = await this.link.page(this.sessionId, { beforeSeq: window.base + 1 }, PAGE_LIMIT);
        if (this.disposed || window !== this.window || page.epoch !== epoch) return;
        if (!window.prepend(page.events)) return;
        grew = true;
      } while (!window.startsClean);
      return inTurn === undefined ? undefined : window.turnAt(inTurn);
    } finally {
      // a page joined to the kept fold costs its own size; a window read from inside a turn is
      // folded once, after the turn's start is read, not again at each of its pages
      if (grew && window === this.window && !this.disposed) {
        this.transcript = window.fold();
        this.scheduleSave();
      }
      this.readingOlder = false;
      if (!this.disposed) this.onChange();
    }
  }

  private async rebuild(): Promise<void> {
    for (let attempt = 0; attempt < MAX_LOAD_RESTARTS; attempt++) {
      const version = this.version;
      const fresh = () => !this.disposed && version === this.version;
      let window: LogWindow | undefined;
      let epoch: string | undefined;
      try {
        // the newest page first, then back to the start of the turn it ends in
        const tail = await this.link.page(this.sessionId, {}, PAGE_LIMIT);
        if (fresh()) {
          epoch = tail.epoch;
          window = LogWindow.tail(tail.events, tail.headSeq, tail.header);
        }
        for (let i = 0; i < MAX_TURN_PAGES && fresh() && window && !window.startsClean; i++) {
          const page = await this.link.page(this.sessionId, { beforeSeq: window.base + 1 }, PAGE_LIMIT);
          if (page.epoch !== epoch || !window.prepend(page.events)) window = undefined;
        }
      } catch (error) {
        if (!fresh()) continue;
        this.fail(error);
        return;
      }
      if (!fresh() || epoch === undefined || window === undefined) {
        if (this.disposed) return;
        continue;
      }
      this.window = window;
      this.epoch = epoch;
      this.transcript = window.fold();
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
      { afterSeq: this.window.lastSeq, ...(this.epoch !== undefined ? { epoch: this.epoch } : {}) },
      (update) => this.apply(update),
      (error) => this.fail(error),
    );
  }

  private apply(update: FollowUpdate): void {
    if (this.disposed) return;
    switch (update.kind) {
      case "opened":
        this.epoch ??= update.epoch;
        if (this.mode !== "live" || update.headSeq > this.window.lastSeq) this.mode = "replaying";
        break;
      case "reset":
        this.epoch = update.epoch;
        this.window = LogWindow.empty();
        this.transcript = emptyTranscript();
        this.mode = "replaying";
        break;
      case "events":
        this.window.append(update.events);
        // the window's kept fold; without one (a replay after a reset, older pages being read into
        // a window that could not keep it) the shown transcript grows on its own
        this.transcript = this.window.transcript ?? applyEvents(this.transcript, update.events);
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
    } else if (code === "unsupported_protocol") {
      // a host of another protocol version fails every stream until the page is reloaded
      this.mode = "stopped";
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
