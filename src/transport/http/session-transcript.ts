import { applyEvents, emptyTranscript, type TranscriptState } from "../../../protocol/transcript.js";
import type { HostApi } from "../../host/host-api.js";
import type { Principal } from "../../host/principal.js";
import type { SessionReadHandle } from "../../host/session-read-handle.js";
import type { SessionProjection } from "../../store/session-store.js";
import { fail } from "./http-reply.js";

/** Events per store read; a 2,000-message session takes a handful of reads the first time. */
const PAGE = 1000;
/** A clear racing the read restarts it; more than this many in a row is reported as a conflict. */
const MAX_RESTARTS = 3;
/**
 * Rounds of reading the commits that landed between the fold and the projection read. Past them
 * (a session committing faster than it is read) the view's head may be a few events newer than
 * its messages; `seq` still names exactly what the messages show.
 */
const MAX_CATCH_UP = 4;

export interface SessionSnapshot {
  /** Folded up to `transcript.lastSeq` of `epoch`: the cursor a follower continues from. */
  transcript: TranscriptState;
  projection: SessionProjection;
  createdAt: number;
  epoch: string;
}

/**
 * Folded transcripts of recently read sessions, keyed by session and epoch. A read folds only the
 * events committed since the cached `lastSeq` (the reducer is incremental by design), so polling
 * a long session costs one empty store read. A clear changes the epoch and drops the entry.
 * @default 16 sessions, least recently read evicted first
 */
export class TranscriptCache {
  readonly #entries = new Map<string, { epoch: string; transcript: TranscriptState }>();

  constructor(readonly capacity = 16) {}

  get(sessionId: string): { epoch: string; transcript: TranscriptState } | undefined {
    const entry = this.#entries.get(sessionId);
    if (!entry) return undefined;
    this.#entries.delete(sessionId);
    this.#entries.set(sessionId, entry);
    return entry;
  }

  put(sessionId: string, epoch: string, transcript: TranscriptState): void {
    this.#entries.delete(sessionId);
    this.#entries.set(sessionId, { epoch, transcript });
    while (this.#entries.size > this.capacity) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.#entries.delete(oldest.value);
    }
  }
}

/**
 * The whole log of a session folded through the transcript reducer, after the host's read check
 * (another principal's session fails exactly like a missing one). Cold: never starts an agent.
 */
export async function readSessionTranscript(
  host: HostApi,
  principal: Principal,
  sessionId: string,
  cache?: TranscriptCache,
): Promise<SessionSnapshot> {
  const reader = await host.openRead(principal, sessionId);
  let cached = cache?.get(sessionId);
  for (let attempt = 0; attempt < MAX_RESTARTS; attempt++) {
    // The epoch of the first page decides: a cached fold from another epoch (a clear) is dropped.
    let epoch = cached?.epoch;
    let transcript = cached?.transcript ?? emptyTranscript();
    let stale = false;
    for (let round = 0; ; round++) {
      const read = await foldToHead(reader, transcript, epoch);
      if (read === "stale") {
        stale = true;
        break;
      }
      ({ transcript, epoch } = read);
      const projection = await reader.projection();
      if (projection.epoch !== epoch) {
        stale = true;
        break;
      }
      // One cut: the row must not reflect commits the fold has not seen; a few rounds catch up.
      if (projection.seq > transcript.lastSeq && round < MAX_CATCH_UP) continue;
      cache?.put(sessionId, epoch, transcript);
      return { transcript, projection, createdAt: projection.createdAt, epoch };
    }
    if (stale) cached = undefined;
  }
  throw fail("session_busy", "the session was cleared repeatedly while being read; try again");
}

/** Folds the pages after `transcript.lastSeq` up to the head; "stale" when the epoch changed. */
async function foldToHead(
  reader: SessionReadHandle,
  from: TranscriptState,
  knownEpoch: string | undefined,
): Promise<{ transcript: TranscriptState; epoch: string } | "stale"> {
  let transcript = from;
  let epoch = knownEpoch;
  for (;;) {
    const page = await reader.readAfter(transcript.lastSeq, PAGE);
    epoch ??= page.epoch;
    if (page.epoch !== epoch) return "stale";
    transcript = applyEvents(transcript, page.events);
    if (page.events.length === 0 || transcript.lastSeq >= page.headSeq) return { transcript, epoch };
  }
}
