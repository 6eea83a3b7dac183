import type { ResultOf, SessionEvent, SessionHeader } from "../../protocol/index.js";
import { emptyTranscript, type TranscriptState } from "../../protocol/transcript.js";
import { TranscriptSegment } from "./transcript-segment.js";

/** An event as a page carries it: one of a type from a newer host is kept, and skipped by the fold. */
type PageEvent = ResultOf<"session.page">["events"][number];

/**
 * What a transcript takes from the start of its log (`session/created`): a window that does not
 * reach back that far has it from the session's header instead.
 */
export type TranscriptSeed = Pick<TranscriptState, "title" | "model" | "origin" | "createdAt" | "forkOf">;

export function seedOf(header: SessionHeader): TranscriptSeed {
  return {
    title: header.title,
    model: header.model,
    origin: null,
    createdAt: header.createdAt,
    forkOf: header.forkOf ?? null,
  };
}

/**
 * The stretch of a session's log the tab holds: the events after seq `base`, unbroken, up to the
 * newest the tab has. A long log is read newest first (`session.page` without a cursor) and
 * older pages are put in front on request, so a tab never waits for the whole log to paint.
 *
 * The transcript is folded from the first `turn/start` the window holds, never from the middle
 * of a turn: a turn's messages, tool calls and interactions then read as they would from the
 * whole log, and a message keeps its id (its row keeps its element) when older pages arrive.
 *
 * The fold is kept, not redone: events that continue the window are folded onto it, and an older
 * page that reaches back to an earlier turn's start is folded alone and joined in front of it
 * (`TranscriptSegment`), so reading a long log back costs about one pass over it. A window held
 * from inside a turn is folded from its first event, and folded again once older pages come.
 */
export class LogWindow {
  /** The seq of the first `turn/start` held. */
  private firstTurnStart: number | undefined;
  /**
   * The transcript folded so far: from the seq `fold` starts at, or from the window's first event
   * when a window held from inside a turn has since grown past a turn's start.
   */
  private folded: TranscriptSegment | undefined;

  private constructor(
    /** The seq before the first event held: 0 once the window reaches the start of the log. */
    public base: number,
    public events: SessionEvent[],
    readonly seed: TranscriptSeed | undefined,
  ) {
    this.firstTurnStart = events.find((e) => e.type === "turn/start")?.seq;
  }

  /** An empty log, or the start of one the follow stream replays. */
  static empty(): LogWindow {
    return new LogWindow(0, [], undefined);
  }

  /**
   * The newest events of a log whose head is `headSeq`; only the unbroken run that ends at the
   * last of them is kept.
   */
  static tail(events: readonly PageEvent[], headSeq: number, header: SessionHeader): LogWindow {
    const run = unbrokenEnd(events);
    const base = run.length > 0 ? run[0]!.seq - 1 : headSeq;
    return new LogWindow(base, run, base > 0 ? seedOf(header) : undefined);
  }

  /** A window kept in the cache: its events are unbroken already. */
  static restore(events: SessionEvent[], seed: TranscriptSeed | undefined): LogWindow {
    const base = events.length > 0 ? events[0]!.seq - 1 : 0;
    return new LogWindow(base, events, base > 0 ? seed : undefined);
  }

  get lastSeq(): number {
    return this.base + this.events.length;
  }

  /** The window starts at a turn's start or at the log's: what it shows reads whole. */
  get startsClean(): boolean {
    return this.base === 0 || this.firstTurnStart !== undefined;
  }

  /** The id of the turn the event at `seq` belongs to, as far as the window reaches back. */
  turnAt(seq: number): string | undefined {
    let turnId: string | undefined;
    for (const e of this.events) {
      if (e.seq > seq) break;
      if (e.type === "turn/start") turnId = e.data.turnId;
    }
    return turnId;
  }

  /** Adds the events that continue the window; any other (a repeat, one past a gap) is left out. */
  append(events: readonly SessionEvent[]): void {
    const from = this.events.length;
    for (const e of events) if (e.seq === this.lastSeq + 1) this.events.push(e);
    const added = this.events.slice(from);
    this.firstTurnStart ??= added.find((e) => e.type === "turn/start")?.seq;
    this.folded?.extend(added);
  }

  /**
   * Puts a page of older events in front. A page that does not end right before the window
   * (read before a reset, or answered twice) changes nothing: `false`.
   */
  prepend(older: readonly PageEvent[]): boolean {
    const run = unbrokenEnd(older);
    if (run.length === 0 || run[run.length - 1]!.seq !== this.base) return false;
    const foldedFrom = this.foldStart();
    this.events = run.concat(this.events);
    this.base = run[0]!.seq - 1;
    this.firstTurnStart = run.find((e) => e.type === "turn/start")?.seq ?? this.firstTurnStart;
    this.foldOlder(foldedFrom);
    return true;
  }

  /** The transcript of the window: from its first turn's start, or the log's, else its first event. */
  fold(): TranscriptState {
    this.folded ??= TranscriptSegment.fold(
      this.startState(),
      this.events.slice(this.foldStart() - this.base - 1),
    );
    return this.folded.state;
  }

  /** The window's transcript while its fold is kept (from `fold` on, until a page cannot be joined to it). */
  get transcript(): TranscriptState | undefined {
    return this.folded?.state;
  }

  /** The seq `fold` starts at. */
  private foldStart(): number {
    return this.base === 0 ? 1 : (this.firstTurnStart ?? this.base + 1);
  }

  private startState(): TranscriptState {
    return { ...emptyTranscript(), ...(this.base > 0 ? this.seed : undefined) };
  }

  /**
   * After a page was put in front of a window folded from `foldedFrom`: the fold, if one is kept,
   * is made the window's again. Unchanged when the page does not move the fold's start (it ends
   * inside the turn the window opened in); else the events from the new start up to the old one
   * are folded and joined in front, or, when that cannot be, the window is folded anew on demand.
   */
  private foldOlder(foldedFrom: number): void {
    const folded = this.folded;
    if (!folded) return;
    const from = this.foldStart();
    const kept = folded.firstSeq === foldedFrom;
    if (kept && from === foldedFrom) return;
    if (!kept || !folded.joinable) {
      this.folded = undefined;
      return;
    }
    const older = TranscriptSegment.fold(
      this.startState(),
      this.events.slice(from - this.base - 1, foldedFrom - this.base - 1),
    );
    if (!folded.joinAfter(older)) this.folded = undefined;
  }
}

/** The events at the end of `events` whose seqs follow one another with no gap. */
function unbrokenEnd(events: readonly PageEvent[]): SessionEvent[] {
  let first = events.length - 1;
  while (first > 0 && events[first - 1]!.seq === events[first]!.seq - 1) first--;
  return events.slice(Math.max(first, 0)) as SessionEvent[];
}
