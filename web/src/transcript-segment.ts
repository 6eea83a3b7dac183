import type { SessionEvent } from "../../protocol/index.js";
import { applyEvents, type TranscriptMessage, type TranscriptState } from "../../protocol/transcript.js";
import { SegmentReferences, type SessionField } from "./segment-references.js";

/**
 * The transcript of an unbroken stretch of a log, folded by the shared reducer from `start`, with
 * what the stretch takes from the events before it (`SegmentReferences`). A stretch that opens
 * with a turn's start can be joined after the fold of the events right before it: the result
 * equals folding both stretches in one pass, at the cost of the older one alone. So reading a
 * long log back page by page costs about as much as folding it once.
 */
export class TranscriptSegment {
  /** The first seq folded; `undefined` while nothing is. */
  firstSeq: number | undefined;

  private constructor(
    public state: TranscriptState,
    private readonly references: SegmentReferences,
  ) {}

  static fold(start: TranscriptState, events: readonly SessionEvent[]): TranscriptSegment {
    const segment = new TranscriptSegment(start, new SegmentReferences());
    segment.extend(events);
    return segment;
  }

  /** Folds the events that follow the stretch (those at or below its last seq are skipped, as the reducer does). */
  extend(events: readonly SessionEvent[]): void {
    let last = this.state.lastSeq;
    for (const e of events) {
      if (e.seq <= last) continue;
      last = e.seq;
      this.firstSeq ??= e.seq;
      this.references.note(e);
    }
    this.state = applyEvents(this.state, events);
  }

  /** An older stretch can be joined in front: this one opens with a turn's start and is not entangled. */
  get joinable(): boolean {
    return this.references.opensWithTurn === true && !this.references.entangled;
  }

  /**
   * Puts `older`, the fold of the events right before this stretch, in front of it. `false` (and
   * nothing changed) when the two cannot be joined: this stretch does not open with a turn's
   * start, does not follow `older` directly, or uses an earlier turn or interaction in a way only a
   * fold of both reads right; the caller then folds them in one pass.
   */
  joinAfter(older: TranscriptSegment): boolean {
    const refs = this.references;
    if (!this.joinable || older.state.lastSeq + 1 !== this.firstSeq) return false;
    // the turns and jobs of `older` this stretch ends, ended where they are
    const before = refs.carried.length > 0 ? applyEvents(older.state, refs.carried) : older.state;
    this.state = joinStates(before, this.state, refs);
    this.firstSeq = older.firstSeq;
    refs.joinAfter(older.references);
    return true;
  }
}

/**
 * One transcript of `before` and then `after`, folded from a `turn/start` on its own: the
 * messages of `after` move down by those of `before` (their `index`, the open tail, the message
 * each running job shows in), and its session fields win where it set them.
 */
function joinStates(
  before: TranscriptState,
  after: TranscriptState,
  refs: SegmentReferences,
): TranscriptState {
  const offset = before.messages.length;
  const moved = (m: TranscriptMessage): TranscriptMessage => ({ ...m, index: m.index + offset });
  const field = <K extends SessionField>(key: K): TranscriptState[K] =>
    refs.fields.has(key) ? after[key] : before[key];
  return {
    lastSeq: after.lastSeq,
    title: field("title"),
    model: field("model"),
    origin: field("origin"),
    createdAt: field("createdAt"),
    forkOf: field("forkOf"),
    messages: offset === 0 ? after.messages : before.messages.concat(after.messages.map(moved)),
    turns: before.turns.concat(after.turns),
    pending: before.pending.concat(after.pending),
    runningJobs: before.runningJobs.concat(
      after.runningJobs.map((j) => ({ jobId: j.jobId, message: j.message + offset })),
    ),
    openTurnId: after.openTurnId,
    streaming: after.streaming,
    tail: after.tail >= 0 ? after.tail + offset : -1,
  };
}
