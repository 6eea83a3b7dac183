import type { ServerResponse } from "node:http";
import { Limits } from "../../../protocol/index.js";
import { applyEvents, emptyTranscript, type TranscriptState } from "../../../protocol/transcript.js";
import type { HostApi } from "../../host/host-api.js";
import type { Principal } from "../../host/principal.js";
import type { SessionReadHandle } from "../../host/session-read-handle.js";
import type { CountsByKey } from "../../store/counts-by-key.js";
import { readReachedHead } from "../../store/read-head.js";
import type { SessionProjection } from "../../store/session-store.js";
import type { BodiesReceiving } from "./bodies-receiving.js";
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
  /** The stored data of the events folded into `transcript`: about what a view of it weighs. */
  dataBytes: number;
}

/** A session's folded transcript, and the data of the events folded into it (what it holds). */
interface CachedTranscript {
  epoch: string;
  transcript: TranscriptState;
  dataBytes: number;
}

/**
 * Folded transcripts of recently read sessions, keyed by session and epoch. A read folds only the
 * events committed since the cached `lastSeq` (the reducer is incremental by design), so polling
 * a long session costs one empty store read. A clear changes the epoch and drops the entry.
 * Bounded by sessions and by the stored data of the events folded into the kept transcripts (a
 * transcript holds about what its events hold): a session over the byte budget is folded again at
 * each read and never kept.
 * @default 16 sessions and 32 MiB of event data, least recently read evicted first
 */
export class TranscriptCache {
  readonly #entries = new Map<string, CachedTranscript>();
  #dataBytes = 0;

  constructor(
    readonly capacity = 16,
    readonly maxDataBytes = 32 * 1024 * 1024,
  ) {}

  /** The event data of every kept transcript together. */
  get dataBytes(): number {
    return this.#dataBytes;
  }

  get(sessionId: string): CachedTranscript | undefined {
    const entry = this.#entries.get(sessionId);
    if (!entry) return undefined;
    this.#entries.delete(sessionId);
    this.#entries.set(sessionId, entry);
    return entry;
  }

  put(sessionId: string, epoch: string, transcript: TranscriptState, dataBytes: number): void {
    this.drop(sessionId);
    if (dataBytes > this.maxDataBytes) return;
    this.#entries.set(sessionId, { epoch, transcript, dataBytes });
    this.#dataBytes += dataBytes;
    while (this.#entries.size > this.capacity || this.#dataBytes > this.maxDataBytes) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.drop(oldest.value);
    }
  }

  /** Forgets a session's transcript. */
  drop(sessionId: string): void {
    const entry = this.#entries.get(sessionId);
    if (!entry) return;
    this.#entries.delete(sessionId);
    this.#dataBytes -= entry.dataBytes;
  }
}

/** How the HTTP views read transcripts. */
export interface TranscriptReading {
  /** Recently folded transcripts; without one every read folds the whole log. */
  readonly cache?: TranscriptCache;
  /**
   * Stored event data a view folds at most: past it the read stops and fails
   * `transcript_too_large`, so one view holds at most this much (plus one read of 1 MiB).
   * @default Limits.transcriptViewBytes (32 MiB)
   */
  readonly maxDataBytes?: number;
  /**
   * The event data each principal's views are folding at once, by principal name (admin too): a
   * fold that would take its principal past `maxDataBytes` is refused `overloaded`, unless it is
   * the only one holding any. Without it, a principal asking for views of long sessions at once
   * made the host fold each whole: 8 cold views of a 27 MB session took 12 s of the event loop's
   * CPU, held 700 MB and delayed a small view of another connection by 1.4 s. Counted as the
   * pages are read; a view of a cached transcript folds only what was committed since.
   */
  readonly folding?: BodiesReceiving;
  /**
   * The event data of the views each principal is being sent, by principal name (admin too),
   * from their render until their answer is written out or its connection closes: a view that
   * would take its principal past `maxDataBytes` is refused `overloaded`, unless it would be the
   * only one. A view of a cached transcript folds nothing, so the bound above never saw it: 40
   * connections asking for a 29 MB view and never reading held 315 MiB (each answer whole in
   * its socket's buffer), without end as connections were added.
   */
  readonly sending?: CountsByKey<string>;
}

/**
 * Counts `snap`'s view as being sent to `principal` until `res` closes (written out, or its
 * connection gone), or throws `overloaded` (`data: {limit: "view_bytes_per_principal", max}`)
 * when the principal's views being sent would pass the bound with it.
 */
export function holdViewSending(
  res: ServerResponse,
  principal: Principal,
  snap: SessionSnapshot,
  { sending, maxDataBytes = Limits.transcriptViewBytes }: TranscriptReading,
): void {
  if (!sending) return;
  const held = sending.get(principal.name);
  if (held > 0 && held + snap.dataBytes > maxDataBytes)
    throw fail(
      "overloaded",
      `the views being sent to one principal may hold ${maxDataBytes} bytes of event data at once; read the answers, then retry`,
      { limit: "view_bytes_per_principal", max: maxDataBytes },
    );
  // a view of no events still counts one, so it is not taken for no view at all
  const bytes = Math.max(1, snap.dataBytes);
  sending.add(principal.name, bytes);
  res.once("close", () => sending.add(principal.name, -bytes));
}

/**
 * The whole log of a session folded through the transcript reducer, after the host's read check
 * (another principal's session fails exactly like a missing one). Cold: never starts an agent.
 */
export async function readSessionTranscript(
  host: HostApi,
  principal: Principal,
  sessionId: string,
  { cache, maxDataBytes = Limits.transcriptViewBytes, folding }: TranscriptReading = {},
): Promise<SessionSnapshot> {
  const reader = await host.openRead(principal, sessionId);
  const receipt = folding?.receive(principal.name, 0);
  let folded = 0;
  const admit = (bytes: number): boolean => {
    if (!receipt) return true;
    folded += bytes;
    receipt.count(folded);
    return receipt.ownerHeld() <= maxDataBytes || receipt.ownerHeld() === receipt.bytes;
  };
  try {
    return await readFolded(reader, sessionId, cache, maxDataBytes, admit);
  } finally {
    receipt?.release();
  }
}

async function readFolded(
  reader: SessionReadHandle,
  sessionId: string,
  cache: TranscriptCache | undefined,
  maxDataBytes: number,
  admit: (bytes: number) => boolean,
): Promise<SessionSnapshot> {
  let cached = cache?.get(sessionId);
  for (let attempt = 0; attempt < MAX_RESTARTS; attempt++) {
    // The epoch of the first page decides: a cached fold from another epoch (a clear) is dropped.
    let epoch = cached?.epoch;
    let transcript = cached?.transcript ?? emptyTranscript();
    let dataBytes = cached?.dataBytes ?? 0;
    let stale = false;
    for (let round = 0; ; round++) {
      const read = await foldToHead(reader, transcript, epoch, maxDataBytes - dataBytes, admit);
      if (read === "overloaded") {
        throw fail(
          "overloaded",
          `the views of one principal may fold ${maxDataBytes} bytes of event data at once; retry once others are answered`,
          { limit: "transcript_fold_bytes_per_principal", max: maxDataBytes },
        );
      }
      if (read === "stale") {
        stale = true;
        break;
      }
      if (read === "too_large") {
        cache?.drop(sessionId);
        throw fail(
          "transcript_too_large",
          `the session holds more than ${maxDataBytes} bytes of event data, more than this view folds; read its log in pages (GET /v1/sessions/{id}/events, session.page)`,
          { sessionId, maxDataBytes },
        );
      }
      ({ transcript, epoch } = read);
      dataBytes += read.dataBytes;
      const projection = await reader.projection();
      if (projection.epoch !== epoch) {
        stale = true;
        break;
      }
      // One cut: the row must not reflect commits the fold has not seen; a few rounds catch up.
      if (projection.seq > transcript.lastSeq && round < MAX_CATCH_UP) continue;
      cache?.put(sessionId, epoch, transcript, dataBytes);
      return { transcript, projection, createdAt: projection.createdAt, epoch, dataBytes };
    }
    if (stale) cached = undefined;
  }
  throw fail("session_busy", "the session was cleared repeatedly while being read; try again");
}

/**
 * Folds the pages after `transcript.lastSeq` up to the head, with the stored data of the events it
 * folded; "stale" when the epoch changed, "too_large" once that data passed `budgetBytes`,
 * "overloaded" when `admit` refused a page (its principal's views fold too much at once). Between
 * reads it lets the event loop run, so a long fold delays other requests by one read, not by all.
 */
async function foldToHead(
  reader: SessionReadHandle,
  from: TranscriptState,
  knownEpoch: string | undefined,
  budgetBytes: number,
  admit: (bytes: number) => boolean,
): Promise<
  { transcript: TranscriptState; epoch: string; dataBytes: number } | "stale" | "too_large" | "overloaded"
> {
  let transcript = from;
  let epoch = knownEpoch;
  let dataBytes = 0;
  for (;;) {
    const page = await reader.readAfter(transcript.lastSeq, PAGE);
    epoch ??= page.epoch;
    if (page.epoch !== epoch) return "stale";
    dataBytes += page.dataBytes;
    if (dataBytes > budgetBytes) return "too_large";
    if (!admit(page.dataBytes)) return "overloaded";
    transcript = applyEvents(transcript, page.events);
    if (readReachedHead(page)) return { transcript, epoch, dataBytes };
    await new Promise((resolve) => setImmediate(resolve));
  }
}
