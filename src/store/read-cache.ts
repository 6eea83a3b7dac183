import type { SessionStateRow } from "./session-state.js";
import type { EncodedReadOutcome } from "./session-store.js";

const MAX_STATE_ROWS = 4096;
const MAX_READS = 64;
const MAX_READ_BYTES = 4 * 1024 * 1024;
/** Larger reads are a single follower's replay, not a tail many followers share: never kept. */
const MAX_KEPT_READ_BYTES = 256 * 1024;

let nextEnvelopeId = 1;

type EncodedRead = EncodedReadOutcome & { status: "ok" };

/**
 * Results of recent reads, dropped whole by every write transaction (committed or rolled back).
 * Reads are synchronous on the one connection and a transaction runs without interleaving, so an
 * entry can only ever hold what the database holds right now. It serves the reconnect storm: many
 * followers of one session re-opening at once ask for the same header and the same missed tail.
 */
export class ReadCache {
  readonly #states = new Map<string, SessionStateRow>();
  readonly #reads = new Map<string, EncodedRead>();
  readonly #envelopeIds = new WeakMap<Uint8Array, number>();
  #readBytes = 0;

  /** Called inside every write transaction and after every rollback. */
  clear(): void {
    // V8 allocates a new table for each Map.clear(), and most transactions follow no read
    if (this.#states.size > 0) this.#states.clear();
    if (this.#reads.size > 0) this.#reads.clear();
    this.#readBytes = 0;
  }

  state(sessionId: string, load: () => SessionStateRow | undefined): SessionStateRow | undefined {
    const cached = this.#states.get(sessionId);
    if (cached !== undefined) return cached;
    const row = load();
    if (row === undefined) return undefined;
    if (this.#states.size >= MAX_STATE_ROWS) this.#states.clear();
    this.#states.set(sessionId, row);
    return row;
  }

  /** Envelopes are told apart by identity: callers pass the same constant every time. */
  encodedReadKey(
    sessionId: string,
    afterSeq: number,
    limit: number,
    perArray: number,
    envelope: Uint8Array | undefined,
  ): string {
    let envelopeId = 0;
    if (envelope !== undefined) {
      envelopeId = this.#envelopeIds.get(envelope) ?? 0;
      if (envelopeId === 0) {
        envelopeId = nextEnvelopeId++;
        this.#envelopeIds.set(envelope, envelopeId);
      }
    }
    return `${sessionId}\u0000${afterSeq}\u0000${limit}\u0000${perArray}\u0000${envelopeId}`;
  }

  encodedRead(key: string): EncodedRead | undefined {
    return this.#reads.get(key);
  }

  keepEncodedRead(key: string, outcome: EncodedRead): void {
    const bytes = sizeOf(outcome);
    if (bytes > MAX_KEPT_READ_BYTES) return;
    while (this.#reads.size >= MAX_READS || this.#readBytes + bytes > MAX_READ_BYTES) {
      const oldest = this.#reads.entries().next().value;
      if (oldest === undefined) break;
      this.#reads.delete(oldest[0]);
      this.#readBytes -= sizeOf(oldest[1]);
    }
    this.#reads.set(key, outcome);
    this.#readBytes += bytes;
  }
}

function sizeOf(outcome: EncodedRead): number {
  let bytes = 0;
  for (const array of outcome.arrays) bytes += array.length;
  return bytes;
}
