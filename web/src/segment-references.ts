import type { SessionEvent } from "../../protocol/index.js";

/** The fields of a transcript an event sets outright, whatever the transcript held before. */
export type SessionField = "title" | "model" | "origin" | "createdAt" | "forkOf";

/**
 * What a stretch of a log takes from the log before it, noted while the stretch is folded: the
 * turns, interactions and jobs it begins, and each of its events that names one begun earlier.
 * A stretch folded on its own reads as it would after the older events (see `TranscriptSegment`)
 * when it begins with a `turn/start` and its only references to earlier things are these:
 *
 * - a `turn/end` or `job/ended` of an earlier turn or job (`carried`): a job outlives its turn,
 *   and a host that stopped ends its open turn late. Each changes only that turn or job (and the
 *   turn's open interactions), so it is applied to the older part before the two are joined;
 * - the session fields it sets (`fields`), which replace the older part's.
 *
 * Any other use of an earlier turn or interaction (output, a card, an answer) depends on where
 * the older part's messages end, and makes the stretch `entangled`: it is folded with the older
 * events instead.
 */
export class SegmentReferences {
  readonly turns = new Set<string>();
  readonly interactions = new Set<string>();
  readonly jobs = new Set<string>();
  readonly fields = new Set<SessionField>();
  carried: SessionEvent[] = [];
  entangled = false;
  /** The stretch's first event is a `turn/start`: nothing of an earlier turn is open in it. */
  opensWithTurn: boolean | undefined;

  note(event: SessionEvent): void {
    this.opensWithTurn ??= event.type === "turn/start";
    switch (event.type) {
      case "session/created":
        this.fields.add("createdAt").add("forkOf");
        if (event.data.title !== undefined) this.fields.add("title");
        if (event.data.model !== undefined) this.fields.add("model");
        if (event.data.origin !== undefined) this.fields.add("origin");
        break;
      case "session/renamed":
        this.fields.add("title");
        break;
      case "session/model":
        this.fields.add("model");
        break;
      case "turn/start":
        this.turns.add(event.data.turnId);
        break;
      case "assistant/delta":
      case "reasoning/delta":
      case "tool/call":
      case "tool/result":
        this.useTurn(event.data.turnId);
        break;
      case "interaction/requested":
        this.useTurn(event.data.turnId);
        this.interactions.add(event.data.interactionId);
        break;
      case "interaction/resolved":
        if (!this.interactions.has(event.data.interactionId)) this.entangled = true;
        break;
      case "job/started":
        this.useTurn(event.data.turnId);
        this.jobs.add(event.data.jobId);
        break;
      case "turn/end":
        if (!this.turns.has(event.data.turnId)) this.carried.push(event);
        break;
      case "job/ended":
        if (!this.jobs.has(event.data.jobId)) this.carried.push(event);
        break;
    }
  }

  /**
   * These references once `older` is put in front: the carried events `older` begins the turn or
   * job of are settled there; the rest are still carried, after `older`'s own.
   */
  joinAfter(older: SegmentReferences): void {
    const open = this.carried.filter((e) =>
      e.type === "turn/end" ? !older.turns.has(e.data.turnId) : !older.jobs.has((e as JobEnded).data.jobId),
    );
    this.carried = [...older.carried, ...open];
    this.entangled ||= older.entangled;
    this.opensWithTurn = older.opensWithTurn;
    for (const id of older.turns) this.turns.add(id);
    for (const id of older.interactions) this.interactions.add(id);
    for (const id of older.jobs) this.jobs.add(id);
    for (const field of older.fields) this.fields.add(field);
  }

  private useTurn(turnId: string): void {
    if (!this.turns.has(turnId)) this.entangled = true;
  }
}

type JobEnded = Extract<SessionEvent, { type: "job/ended" }>;
