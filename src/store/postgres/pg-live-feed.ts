import type { CommitListeners } from "../commit-listeners.js";
import type { InteractionState, LiveStateNotice, StoredInteraction } from "../live-state-store.js";
import { FIRST_PENDING, type PendingKey, type PgLiveReads } from "./pg-live-rows.js";
import type { LiveHint } from "./pg-notice-payload.js";
import { eachPage } from "./pg-paged-read.js";
import type { PgLiveNotice } from "./pg-write-batch.js";

/** Entries each memory keeps; past it the oldest is forgotten (at worst a notice repeats). */
const MAX_REMEMBERED = 50_000;
/** Rows one statement of a re-read returns. */
const READ_PAGE = 500;
/** A deleted session's queue version: its emptied queue was announced, and nothing follows it. */
const DELETED = Number.MAX_SAFE_INTEGER;

interface KnownInteraction {
  state: InteractionState;
  sessionId: string;
  owner: string;
}

/** A Map that forgets its oldest entry past `MAX_REMEMBERED`. */
class Memory<V> extends Map<string, V> {
  override set(key: string, value: V): this {
    super.delete(key);
    if (this.size >= MAX_REMEMBERED) {
      const oldest = this.keys().next().value;
      if (oldest !== undefined) super.delete(oldest);
    }
    return super.set(key, value);
  }
}

/**
 * Live-state notices of every host for this store's `subscribeLive` listeners. Local ones go out
 * right after COMMIT; another host's arrive as hints in its NOTIFY and are re-read from the rows.
 * What was announced is remembered per queue (its version), interaction (its state) and lease
 * (its generation), so each change reaches a listener once whichever way it came, and a re-read
 * of everything (after a missed NOTIFY) announces only what changed meanwhile.
 */
export class PgLiveFeed {
  private readonly queues = new Memory<number>();
  private readonly interactions = new Memory<KnownInteraction>();
  /** Per session: generation × 2, plus 1 once released; a notice must rank above it. */
  private readonly leases = new Memory<number>();

  constructor(
    private readonly listeners: CommitListeners,
    private readonly reads: PgLiveReads,
  ) {}

  /** This host's notices, after its COMMIT. */
  local(notices: readonly PgLiveNotice[]): void {
    for (const { notice, queueVersion } of notices) {
      if (notice.kind === "queue" && queueVersion !== undefined) {
        if (queueVersion <= (this.queues.get(notice.sessionId) ?? 0)) continue;
        this.queues.set(notice.sessionId, queueVersion);
      }
      if (notice.kind === "lease" && !this.leaseChanged(notice)) continue;
      if (notice.kind === "interaction.requested") {
        const { interactionId, sessionId } = notice.interaction;
        this.interactions.set(interactionId, { state: "pending", sessionId, owner: notice.owner });
      } else if (notice.kind === "interaction.resolved" || notice.kind === "interaction.withdrawn") {
        const state = notice.kind === "interaction.resolved" ? "resolved" : "withdrawn";
        this.interactions.set(notice.interactionId, {
          state,
          sessionId: notice.sessionId,
          owner: notice.owner,
        });
      }
      this.emit(notice);
    }
  }

  /** Another host's hints: re-reads what they name (everything, for `all`). */
  async remote(hints: readonly LiveHint[] | "all"): Promise<void> {
    if (hints === "all") return this.rereadAll();
    for (const hint of hints) {
      if (hint.kind === "queue") {
        if (hint.version > (this.queues.get(hint.sessionId) ?? 0))
          await this.rereadQueue(hint.sessionId, hint.version);
      } else if (hint.kind === "interaction") {
        await this.rereadInteraction(hint.interactionId, await this.reads.interaction(hint.interactionId));
      } else if (hint.kind === "job") {
        const { sessionId, owner, jobId, progress } = hint;
        this.emit({ kind: "job.progress", owner, sessionId, jobId, progress });
      } else {
        const { sessionId, owner, hostId, generation } = hint;
        const notice: LiveStateNotice = { kind: "lease", owner, sessionId, hostId, generation };
        if (this.leaseChanged(notice)) this.emit(notice);
      }
    }
  }

  /**
   * Repairs missed wake-ups: every queue that moved, every interaction that changed state, leases.
   * `since` (a 32-bit transaction id): the oldest transaction whose NOTIFY may have been missed.
   * Only the queues it or a younger one changed are compared (null: every queue), and the
   * interactions it or a younger one settled are read too, so an answer is announced even for a
   * question this feed no longer remembers announcing (its memory is bounded).
   */
  async rereadAll(since: string | null = null): Promise<void> {
    await this.rereadQueues(since);
    if (since !== null) await this.rereadDeletedQueues(since);
    await this.rereadInteractions(since);
    await this.rereadLeases();
  }

  private rereadQueues(since: string | null): Promise<void> {
    return eachPage(
      (after) => this.reads.queueVersions(since, after, READ_PAGE),
      "",
      READ_PAGE,
      (row) => row.session_id,
      ({ session_id: sessionId, version }) =>
        version > (this.queues.get(sessionId) ?? 0) ? this.rereadQueue(sessionId) : undefined,
    );
  }

  /**
   * A delete removes the queue's version with the queue, so `rereadQueues` no longer sees it:
   * each session deleted since whose queue this feed announced gets its emptied queue announced.
   */
  private rereadDeletedQueues(since: string): Promise<void> {
    return eachPage(
      (after) => this.reads.retiredSince(since, after, READ_PAGE),
      "",
      READ_PAGE,
      (row) => row.session_id,
      ({ session_id: sessionId, owner }) => {
        const known = this.queues.get(sessionId);
        if (known === undefined || known === DELETED) return;
        this.queues.set(sessionId, DELETED);
        this.emit({ kind: "queue", sessionId, owner, items: [] });
      },
    );
  }

  private async rereadInteractions(since: string | null): Promise<void> {
    // the questions announced as pending (no more than this feed remembers): those the pending
    // rows do not show were answered or withdrawn meanwhile, and are read on their own
    const unseen = new Set<string>();
    for (const [interactionId, known] of this.interactions)
      if (known.state === "pending") unseen.add(interactionId);
    await eachPage(
      (after) => this.reads.pendingInteractions(after, READ_PAGE),
      FIRST_PENDING,
      READ_PAGE,
      ({ interaction }): PendingKey => interaction,
      (stored) => {
        unseen.delete(stored.interaction.interactionId);
        return this.rereadInteraction(stored.interaction.interactionId, stored);
      },
    );
    for (const interactionId of unseen) {
      if (this.interactions.get(interactionId)?.state === "pending")
        await this.rereadInteraction(interactionId, await this.reads.interaction(interactionId));
    }
    if (since === null) return;
    await eachPage(
      (after) => this.reads.settledSince(since, after, READ_PAGE),
      "",
      READ_PAGE,
      (stored) => stored.interaction.interactionId,
      (stored) => this.rereadInteraction(stored.interaction.interactionId, stored),
    );
  }

  private async rereadLeases(): Promise<void> {
    let after: string | null = null;
    do {
      const page = await this.reads.leasePage(after, READ_PAGE);
      for (const { sessionId, hostId, generation, owner } of page.leases) {
        const notice: LiveStateNotice = { kind: "lease", owner, sessionId, hostId, generation };
        if (this.leaseChanged(notice)) this.emit(notice);
      }
      after = page.next;
    } while (after !== null);
  }

  /** `hinted`: the version a hint named; no version row then means the session's delete removed it. */
  private async rereadQueue(sessionId: string, hinted?: number): Promise<void> {
    const queue = await this.reads.versionedQueue(sessionId);
    const deleted = queue.version === 0 && hinted !== undefined;
    const version = deleted ? DELETED : queue.version;
    if (version <= (this.queues.get(sessionId) ?? 0)) return;
    this.queues.set(sessionId, version);
    if (queue.owner !== null) this.emit({ kind: "queue", sessionId, owner: queue.owner, items: queue.items });
  }

  /** Announces the transitions from the state last announced to the row's (a missing row: withdrawn). */
  private async rereadInteraction(interactionId: string, stored: StoredInteraction | null): Promise<void> {
    const known = this.interactions.get(interactionId);
    if (known !== undefined && known.state !== "pending") return;
    if (!stored) {
      if (known === undefined) return;
      this.interactions.set(interactionId, { ...known, state: "withdrawn" });
      this.emit({
        kind: "interaction.withdrawn",
        owner: known.owner,
        sessionId: known.sessionId,
        interactionId,
      });
      return;
    }
    const { interaction, owner, state } = stored;
    const sessionId = interaction.sessionId;
    if (known === undefined) this.emit({ kind: "interaction.requested", owner, interaction });
    this.interactions.set(interactionId, { state, sessionId, owner });
    if (state === "resolved" && stored.resolution)
      this.emit({
        kind: "interaction.resolved",
        owner,
        sessionId,
        interactionId,
        resolution: stored.resolution,
      });
    else if (state === "withdrawn")
      this.emit({ kind: "interaction.withdrawn", owner, sessionId, interactionId });
  }

  /** True (and remembered) when a lease notice is newer than what was announced (a late hint is not). */
  private leaseChanged(notice: Extract<LiveStateNotice, { kind: "lease" }>): boolean {
    const rank = notice.generation * 2 + (notice.hostId === null ? 1 : 0);
    if (rank <= (this.leases.get(notice.sessionId) ?? 0)) return false;
    this.leases.set(notice.sessionId, rank);
    return true;
  }

  private emit(notice: LiveStateNotice): void {
    this.listeners.deliver([], [notice]);
  }
}
