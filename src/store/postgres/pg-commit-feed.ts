import type pg from "pg";
import type { SessionEvent } from "../../../protocol/index.js";
import { CommitListeners, type GlobalCommitListener } from "../commit-listeners.js";
import { CountsByKey } from "../counts-by-key.js";
import type { DismissalChange } from "../dismissals.js";
import type { LiveStateNotice } from "../live-state-store.js";
import { readReachedHead } from "../read-head.js";
import type { CommitListener, CommitNotice, SessionProjection } from "../session-store.js";
import type { PendingNotice } from "../write-batch.js";
import { LEGACY_CHECK_MS, legacyListeners } from "./pg-host-presence.js";
import { PgLiveFeed } from "./pg-live-feed.js";
import type { PgLiveReads } from "./pg-live-rows.js";
import {
  type BatchPayload,
  type ChangedSession,
  decodePayload,
  encodePayload,
  sentBy,
} from "./pg-notice-payload.js";
import { eachPage } from "./pg-paged-read.js";
import type {
  DismissedPair,
  PgReads,
  SessionHead,
  VersionedProjection,
  WrittenProjection,
} from "./pg-reads.js";
import type { Announcement, PgLiveNotice } from "./pg-write-batch.js";

/** Events read per round trip when catching up with another host's commits. */
const READ_PAGE = 500;
/** Sessions whose delivered head (and shown projection version) is remembered; past it the oldest is forgotten (harmless). */
const MAX_HEADS = 50_000;
/** Sessions whose heads one statement reads when the host re-reads what it follows. */
const HEADS_PAGE = 1_000;
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5_000;
/**
 * A session's local notices held behind a catch-up read that failed wait for the re-read of the
 * reconnect it owes (see `owe`) for at most this long, and at most `MAX_OWED_HELD` of them: past
 * either, they go out as they are. Twice the longest wait between two reconnect attempts.
 */
export const OWED_HOLD_MS = 2 * RECONNECT_MAX_MS;
export const MAX_OWED_HELD = 1_000;
// the snapshot's oldest running transaction: its 64-bit id (a projection row's `version`) and the
// 32-bit one rows carry in `xmin`
export const LISTENING_SINCE = `SELECT x::text AS xid8, (x::text::bigint % 4294967296)::text AS xid
  FROM pg_snapshot_xmin(pg_current_snapshot()) AS x`;

/** A transaction's id, as `LISTENING_SINCE` reads it. */
interface Watermark {
  xid: string;
  xid8: string;
}

interface Delivered {
  epoch: string;
  seq: number;
}

/** Sets `key` as the newest entry of `map`, forgetting the oldest past `MAX_HEADS` (harmless: it is read again). */
function setNewest<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  if (map.size >= MAX_HEADS) {
    const oldest = map.keys().next().value;
    if (oldest !== undefined) map.delete(oldest);
  }
  map.set(key, value);
}

interface DismissalSubscriber {
  listener: (change: DismissalChange) => void;
  watched: () => Iterable<string>;
}

const pairKey = (principal: string, sessionId: string) => `${principal} ${sessionId}`;

/** A local commit's notice, and the version its projection row had at that COMMIT. */
interface HeldNotice {
  pending: PendingNotice;
  version: number | undefined;
}

/**
 * A session's local notices held back behind another host's rows, in commit order, and the epoch
 * the session's delivered head was in when the first was held. `owed`: the catch-up read they
 * waited for failed, and this timer releases them as they are past `OWED_HOLD_MS` unless the
 * reconnect's re-read released them first.
 */
interface Hold {
  notices: HeldNotice[];
  epoch: string;
  owed?: NodeJS.Timeout;
}

/**
 * Commit notices for this store's subscribers, whichever host committed. Local commits are
 * delivered synchronously right after COMMIT (as in SQLite). Each committed batch sends one NOTIFY
 * on a channel per schema (see `announcement`), from outside the write transaction so it adds no
 * lock to the commit, carrying only (session, kind, epoch, seq range; for a dismissal, whose it is
 * and its state, told to `subscribeDismissals` alone), and none when no other host
 * is present (see `pg-host-presence.ts`). A store that hears another host's NOTIFY reads the rows above what it
 * delivered for that session and delivers them through the same `subscribe` API. Every delivery,
 * local or remote, goes through one per-session watermark, so nothing is delivered twice; a missed
 * NOTIFY only delays delivery until the next one (or a reconnect) makes the store read again.
 */
export class PgCommitFeed {
  private readonly listeners = new CommitListeners();
  private readonly interest = new CountsByKey();
  private globalListeners = 0;
  private readonly delivered = new Map<string, Delivered>();
  /**
   * The version of each session's projection row as its store-wide listeners were last given it:
   * after an outage, a row written meanwhile is told again only if it is not that version.
   */
  private readonly shown = new Map<string, number>();
  /**
   * Creates whose rows were told part way when a read failed: each session's epoch and the
   * create's last seq. Whichever catch-up reads the session next (a reconnect's re-read too) tells
   * the rest up to that seq as created: a fork's copied prefix is no news (bounded as `delivered`).
   */
  private readonly partlyCreated = new Map<string, Delivered>();
  /**
   * Sessions an outage's re-read told store-wide listeners as created (a `meta` marked `created`)
   * before anything of them was delivered here, with their epoch: the create's own NOTIFY, when it
   * was heard while the re-read ran, still gives its rows to followers, but adds the session no
   * more (bounded as `delivered`).
   */
  private readonly toldCreated = new Map<string, string>();
  /** Local notices held back behind another host's rows this store has not read yet. */
  private readonly held = new Map<string, Hold>();
  private remote: Promise<void> = Promise.resolve();
  private liveListeners = 0;
  private readonly dismissalSubscribers = new Set<DismissalSubscriber>();
  /**
   * Each principal's dismissal of a session as last told or made here, true or false (a change
   * heard twice is told once; after an outage, a remembered dismissal gone is told as a restore),
   * or as read when the principal's first socket arrived (`read`: nobody was told of it, so the
   * NOTIFY of that very dismissal, heard after the read, is still told).
   */
  private readonly dismissalStates = new Map<string, DismissedPair & { dismissed: boolean; read?: true }>();
  /**
   * Principals whose dismissals were read (see `rememberDismissalsOf`): read once, however often
   * their sockets come and go, so a peer reconnecting cannot make the host read them again.
   */
  private readonly dismissalsRead = new Map<string, true>();
  private readonly live: PgLiveFeed;
  private client: pg.Client | undefined;
  /** A listener of a build that holds no presence lock is connected: announce every batch. */
  private legacyListeners = false;
  private legacyTimer: NodeJS.Timeout | undefined;
  private reconnectDelay = RECONNECT_MIN_MS;
  private reconnectTimer: NodeJS.Timeout | undefined;
  /**
   * The oldest transaction running when this connection's LISTEN began (`since`), and when the
   * previous connection's did (`before`): whatever the last outage left unheard was written by
   * `before` or a younger one.
   */
  private listening: { since: Watermark; before: Watermark | null } | undefined;
  /**
   * Where an outage's re-read that failed started: owed, so the next connection's re-read starts
   * there (not at the failed connection's own start, which would skip what the failed one owed).
   */
  private owedFrom: { from: Watermark | null } | undefined;
  /**
   * Where the re-read for the next NOTIFY that lists nothing ("re-read": a batch too large to list)
   * starts, of commits and of live state apart: the oldest transaction running when the previous
   * such re-read of them began (and completed), else this LISTEN's. A batch announced so began
   * after it, or had committed before it and was read by that re-read (or an earlier one).
   */
  private readonly rereadFrom: { commits?: Watermark; live?: Watermark } = {};
  private closed = false;

  constructor(
    private readonly connect: () => pg.Client,
    /**
     * Resolves once the group-commit connection holds the presence lock (see
     * `pg-host-presence.ts`): until then other hosts may announce nothing to this one.
     */
    private readonly present: () => Promise<void>,
    private readonly reads: PgReads,
    private readonly hostId: string,
    private readonly channel: string,
    liveReads: PgLiveReads,
  ) {
    this.live = new PgLiveFeed(this.listeners, liveReads);
  }

  async start(): Promise<void> {
    const client = this.connect();
    client.on("notification", (message) => {
      if (message.channel === this.channel && message.payload !== undefined) this.heard(message.payload);
    });
    client.on("error", () => this.lost(client));
    client.on("end", () => this.lost(client));
    let listening: Watermark;
    let legacy: boolean;
    try {
      await client.connect();
      // present before listening: a batch another host commits from now on is announced
      await this.present();
      // and, in the same transaction, the oldest transaction still running: every older one had
      // committed before this LISTEN, so the re-read after it sees it, and the re-read after the
      // next outage need only look at what this one or a younger one wrote
      const results = (await client.query(
        `LISTEN "${this.channel}"; ${LISTENING_SINCE}; ${legacyListeners(this.channel)}`,
      )) as unknown as [pg.QueryResult, pg.QueryResult<Watermark>, pg.QueryResult<{ legacy: boolean }>];
      listening = results[1].rows[0]!;
      legacy = results[2].rows[0]!.legacy;
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.closed) {
      // closed while this connection was being made: nothing will end it later
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.legacyListeners = legacy;
    this.watchForLegacyListeners(client);
    const owed = this.owedFrom;
    this.listening = { since: listening, before: owed ? owed.from : (this.listening?.since ?? null) };
  }

  subscribe(sessionId: string, listener: CommitListener): () => void {
    this.interest.add(sessionId);
    const unsubscribe = this.listeners.subscribe(sessionId, listener);
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      unsubscribe();
      this.interest.add(sessionId, -1);
    };
  }

  subscribeAll(listener: GlobalCommitListener): () => void {
    this.globalListeners++;
    const unsubscribe = this.listeners.subscribeAll(listener);
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      this.globalListeners--;
      unsubscribe();
    };
  }

  subscribeLive(listener: (notice: LiveStateNotice) => void): () => void {
    this.liveListeners++;
    const unsubscribe = this.listeners.subscribeLive(listener);
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      this.liveListeners--;
      unsubscribe();
    };
  }

  /**
   * Dismissals and restores another host made (see `DismissalStore.subscribeDismissals`): as
   * their NOTIFY is heard, and after an outage (or a NOTIFY too large to say what changed) those
   * `watched` principals made meanwhile: the dismissals a transaction since the previous LISTEN
   * wrote, and the restores of those this store remembers dismissed.
   */
  subscribeDismissals(
    listener: (change: DismissalChange) => void,
    watched: () => Iterable<string>,
  ): () => void {
    const subscriber = { listener, watched };
    this.dismissalSubscribers.add(subscriber);
    return () => {
      this.dismissalSubscribers.delete(subscriber);
    };
  }

  /**
   * Remembers the dismissals `principal` has now (those of which nothing is remembered), so that
   * the re-read after an outage finds a restore of one made meanwhile on another host.
   */
  async rememberDismissalsOf(principal: string): Promise<void> {
    if (this.dismissalSubscribers.size === 0 || this.closed || this.dismissalsRead.has(principal)) return;
    setNewest(this.dismissalsRead, principal, true);
    const dismissed = await this.reads.dismissalsOf(principal, MAX_HEADS).catch((err: unknown) => {
      // read again at their next socket's arrival
      this.dismissalsRead.delete(principal);
      throw err;
    });
    for (const sessionId of dismissed) {
      const key = pairKey(principal, sessionId);
      // a change heard while this was read is newer than the read
      if (!this.dismissalStates.has(key))
        setNewest(this.dismissalStates, key, { principal, sessionId, dismissed: true, read: true });
    }
  }

  /**
   * What to tell the other hosts about a batch, sent by the group commit right after its COMMIT
   * (one NOTIFY per committed batch, if another host is present); null when the batch changed
   * nothing they follow.
   */
  announcement(notices: readonly PendingNotice[], liveNotices: readonly PgLiveNotice[]): Announcement | null {
    if ((notices.length === 0 && liveNotices.length === 0) || this.closed) return null;
    return {
      channel: this.channel,
      payload: encodePayload(this.hostId, notices, liveNotices),
      everyone: this.legacyListeners,
    };
  }

  /**
   * The group-commit connection ended, and with it the presence lock: other hosts may have
   * announced nothing since. Listens again (after `present`), reading what is followed.
   */
  listenAgain(): void {
    if (this.client) this.lost(this.client);
  }

  /**
   * After a local COMMIT: deliver now, in commit order. `versionOf`: the version of each session's
   * projection row as that COMMIT left it.
   */
  committed(
    notices: readonly PendingNotice[],
    liveNotices: readonly PgLiveNotice[] = [],
    versionOf?: (sessionId: string) => number | undefined,
  ): void {
    for (const pending of notices) {
      if (pending.dismissal) this.rememberDismissal({ sessionId: pending.sessionId, ...pending.dismissal });
      this.deliverLocal({ pending, version: versionOf?.(pending.sessionId) });
    }
    this.live.local(liveNotices);
  }

  /** Looks again for listeners of older builds every `LEGACY_CHECK_MS` while `client` listens. */
  private watchForLegacyListeners(client: pg.Client): void {
    clearInterval(this.legacyTimer);
    this.legacyTimer = setInterval(() => {
      if (this.client !== client) return clearInterval(this.legacyTimer);
      client.query<{ legacy: boolean }>(legacyListeners(this.channel)).then(
        (result) => {
          this.legacyListeners = result.rows[0]!.legacy;
        },
        () => undefined,
      );
    }, LEGACY_CHECK_MS);
    this.legacyTimer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.legacyTimer);
    await this.remote;
    // no re-read comes any more: what a failed read left held goes out as it is
    for (const [sessionId, hold] of [...this.held]) if (hold.owed) this.releaseAsTheyAre(sessionId, hold);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private interested(sessionId: string): boolean {
    return this.globalListeners > 0 || this.interest.has(sessionId);
  }

  private heard(text: string): void {
    if (sentBy(text, this.hostId)) return;
    const payload = decodePayload(text);
    if (payload.host === this.hostId) return;
    this.remote = this.remote
      .then(() => this.applyHeard(payload))
      .catch(() => {
        // a read that failed is owed: the NOTIFYs after it name only their own sessions, and the
        // next of its sessions' may never come (a turn's end is its last commit). The LISTEN
        // starts again, and its outage's re-read covers this batch (heard on it, so written
        // after its start)
        this.listenAgain();
      });
  }

  /**
   * A NOTIFY another host sent: what it lists, or for a batch too large to list (or a payload
   * this build cannot read) a re-read as after an outage, from `rereadFrom`, so that every
   * listener here learns of every session the batch changed (its store-wide listeners of the
   * sessions it created too: nothing here followed them), though the LISTEN connection was up.
   */
  private async applyHeard(payload: BatchPayload): Promise<void> {
    const { changes, live } = payload;
    // taken before reading: whatever committed before it, this re-read sees
    const next = changes === "all" || live === "all" ? await this.oldestRunning() : null;
    if (changes === "all") {
      const from = this.rereadFrom.commits ?? this.listening?.since ?? null;
      await this.rereadAll(from);
      await this.rereadDismissals(from);
      if (next) this.rereadFrom.commits = next;
    } else await this.applyChanges(changes);
    if (this.liveListeners === 0 || this.closed) return;
    if (live !== "all") return this.live.remote(live);
    const from = this.rereadFrom.live ?? this.listening?.since ?? null;
    await this.live.rereadAll(from?.xid ?? null);
    if (next) this.rereadFrom.live = next;
  }

  /** The oldest transaction running now, read on the LISTEN connection (null: it is gone, and its outage re-read will follow). */
  private async oldestRunning(): Promise<Watermark | null> {
    const client = this.client;
    if (!client) return null;
    return (await client.query<Watermark>(LISTENING_SINCE)).rows[0] ?? null;
  }

  private async applyChanges(changes: ChangedSession[]): Promise<void> {
    for (const change of changes) {
      if (
        change.dismissal &&
        change.principal !== undefined &&
        change.dismissed !== undefined &&
        !this.closed
      )
        this.tellDismissal({
          sessionId: change.sessionId,
          principal: change.principal,
          dismissed: change.dismissed,
        });
      if (this.closed || !this.interested(change.sessionId)) continue;
      const { sessionId } = change;
      if (change.kind === "delete") await this.deliverRemoteDelete(sessionId);
      // a dismissal changed no row: nothing to read, as the committing host told its own listeners
      else if (change.dismissal) this.deliver(sessionId, { kind: "meta", dismissal: true }, null);
      else if (change.kind === "meta")
        this.deliverRead(sessionId, { kind: "meta" }, await this.projectionFor(sessionId));
      else if (change.kind === "clear") {
        const read = await this.projectionFor(sessionId);
        this.deliverRead(sessionId, { kind: "clear", epoch: change.epoch }, read);
      } else if (change.kind === "create")
        // only the rows the create wrote are told as created: rows committed after it (a first
        // turn, failed perhaps) are told as appended, by their own NOTIFYs behind this one, so
        // store-wide listeners hear of them as they would have had this read come sooner
        await this.catchUp(
          sessionId,
          change.epoch,
          change.fromSeq,
          true,
          Math.max(change.fromSeq, change.toSeq),
        );
      else await this.catchUp(sessionId, change.epoch, change.fromSeq);
    }
  }

  /** Remembers a principal's dismissal state of a session, the newest last (bounded as `delivered` is). */
  private rememberDismissal(change: DismissalChange): void {
    if (this.dismissalSubscribers.size === 0) return;
    setNewest(this.dismissalStates, pairKey(change.principal, change.sessionId), change);
  }

  /**
   * Tells the dismissal subscribers of a change, unless it is the state they were last told (or
   * that was made here). A state only read is no telling: the read may have come after the
   * change's COMMIT and before its NOTIFY was heard, with the principal's list read before it.
   */
  private tellDismissal(change: DismissalChange): void {
    if (this.dismissalSubscribers.size === 0) return;
    const known = this.dismissalStates.get(pairKey(change.principal, change.sessionId));
    if (known && !known.read && known.dismissed === change.dismissed) return;
    this.rememberDismissal(change);
    for (const { listener } of this.dismissalSubscribers) {
      try {
        listener(change);
      } catch {
        // a faulty listener must not stop the others
      }
    }
  }

  /**
   * What an unheard NOTIFY may have said of the dismissals of the principals watched here: the
   * remembered dismissals of theirs now gone (restored, or their session deleted), a page at a
   * time, then their dismissals a transaction since the previous LISTEN (or this one, when there
   * was none) wrote that were not told. A restore of a dismissal this store does not remember
   * (see `rememberDismissalsOf`), or has forgotten, is not found: a client that missed it
   * recovers with `session.list`.
   */
  private async rereadDismissals(since: Watermark | null): Promise<void> {
    if (this.dismissalSubscribers.size === 0 || this.closed || !since) return;
    const watched = new Set<string>();
    for (const subscriber of this.dismissalSubscribers)
      for (const name of subscriber.watched()) watched.add(name);
    if (watched.size === 0) return;
    const remembered = [...this.dismissalStates.values()].filter(
      (s) => s.dismissed && watched.has(s.principal),
    );
    for (let start = 0; start < remembered.length && !this.closed; start += HEADS_PAGE) {
      const page = remembered.slice(start, start + HEADS_PAGE);
      const still = new Set(
        (await this.reads.stillDismissed(page)).map((p) => pairKey(p.principal, p.sessionId)),
      );
      for (const { principal, sessionId } of page)
        if (!still.has(pairKey(principal, sessionId)))
          this.tellDismissal({ sessionId, principal, dismissed: false });
    }
    if (this.closed) return;
    for (const { principal, sessionId } of await this.reads.dismissedSince([...watched], since.xid))
      this.tellDismissal({ sessionId, principal, dismissed: true });
  }

  /** Reads and delivers every row above the delivered head (from `fromSeq` when none is known). */
  private async catchUp(
    sessionId: string,
    epoch: string,
    fromSeq: number,
    created = false,
    untilSeq = Number.MAX_SAFE_INTEGER,
  ): Promise<void> {
    // a create longer than a page is told page by page, each page as created (the rows of a
    // fork's copied prefix are no news), once its first page was
    let creating = false;
    // a subscriber may leave while a read is out; nothing is delivered then, so the loop ends
    while (this.interested(sessionId)) {
      const head = this.delivered.get(sessionId);
      const after = head === undefined ? Math.max(0, fromSeq - 1) : head.epoch === epoch ? head.seq : 0;
      if (after >= untilSeq) return;
      // the rest of a create whose earlier read failed part way: read up to its end on its own
      const partly = this.partlyCreated.get(sessionId);
      const resuming = !created && partly !== undefined && head?.epoch === partly.epoch && after < partly.seq;
      const until = resuming ? Math.min(untilSeq, partly.seq) : untilSeq;
      const read = await this.reads.readAfter(sessionId, after, Math.min(READ_PAGE, until - after));
      if (read.status === "retired") return this.deliverRemoteDelete(sessionId);
      if (read.status !== "ok") return;
      const current = this.delivered.get(sessionId);
      if (current !== undefined && current.epoch !== read.epoch && !created) {
        // a clear this store has not heard of yet: say so, then read the new epoch from its
        // start (this read began after the old epoch's head); store-wide listeners get the row
        // as they would with the clear's own NOTIFY, which then finds the epoch delivered
        this.deliverRead(
          sessionId,
          { kind: "clear", epoch: read.epoch },
          await this.projectionFor(sessionId),
        );
        epoch = read.epoch;
        continue;
      }
      // this host's own commits held behind these rows go out when their hold ends, as its own:
      // told here, they would reach store-wide listeners as another host's (a failed turn's
      // `agent.error` sent twice, once by the turn that failed here)
      const ownFrom = created ? undefined : this.heldFrom(sessionId, read.epoch);
      const events = ownFrom === undefined ? read.events : read.events.filter((event) => event.seq < ownFrom);
      if (events.length === 0) return;
      creating = created && (creating || events[0]?.seq === 1);
      const lastSeq = events[events.length - 1]!.seq;
      const asCreated = creating || (resuming && read.epoch === partly.epoch);
      if (creating && lastSeq < untilSeq)
        setNewest(this.partlyCreated, sessionId, { epoch: read.epoch, seq: untilSeq });
      else if (asCreated && lastSeq >= (creating ? untilSeq : partly!.seq))
        this.partlyCreated.delete(sessionId);
      // the first page of a create the re-read told as created already: nothing left to announce
      const told = creating && events[0]?.seq === 1 && this.toldCreated.get(sessionId) === read.epoch;
      if (told) this.toldCreated.delete(sessionId);
      const notice: CommitNotice = asCreated
        ? told
          ? { kind: "create", epoch: read.epoch, events }
          : { kind: "create", epoch: read.epoch, events, remote: true }
        : { kind: "append", epoch: read.epoch, events, remote: true };
      this.deliverRead(sessionId, notice, await this.projectionFor(sessionId));
      // stopped at a held commit of this host's: the rest is the hold's
      if (events.length < read.events.length || readReachedHead(read) || lastSeq >= untilSeq) return;
      epoch = read.epoch;
    }
  }

  /** The first seq of this host's commits of `epoch` held back in the session, if any. */
  private heldFrom(sessionId: string, epoch: string): number | undefined {
    const first = this.held.get(sessionId)?.notices[0]?.pending.notice;
    return first?.kind === "append" && first.epoch === epoch ? first.events[0]?.seq : undefined;
  }

  /**
   * After the LISTEN connection was down: the heads of every session followed here, a page of
   * sessions per statement, and a read of only those that moved (a commit, a clear, a delete). A
   * host following thousands of sessions gets back in with a few statements, not a read of each,
   * so the NOTIFYs heard meanwhile (handled after this) are not held up for long. `since`: the
   * oldest transaction whose writes may be unheard (null: any; then store-wide listeners are
   * told nothing more).
   */
  private async rereadAll(since: Watermark | null): Promise<void> {
    // sessions this store delivered something of before this re-read: not news to its listeners
    const known = since ? new Set([...this.delivered.keys(), ...this.shown.keys()]) : null;
    // a copy: each delivery moves its session to the end of the map
    const followed = [...new Set([...this.delivered.keys(), ...this.interest.keys()])];
    // followed sessions delivered nothing of yet: read once store-wide listeners were told which of
    // them were created meanwhile, so their rows come after the create, as the NOTIFYs had them
    const unread: { sessionId: string; epoch: string; fromSeq: number }[] = [];
    for (let start = 0; start < followed.length && !this.closed; start += HEADS_PAGE) {
      const page = followed.slice(start, start + HEADS_PAGE).filter((id) => this.interested(id));
      if (page.length === 0) continue;
      const heads = await this.reads.heads(page, since?.xid ?? null);
      const failures = await this.untoldFailuresOf(page, heads, since);
      for (const sessionId of page) {
        const now = heads.get(sessionId);
        if (!now || !this.interested(sessionId)) continue;
        if (now.retired) {
          await this.deliverRemoteDelete(sessionId);
          continue;
        }
        const was = this.delivered.get(sessionId);
        if (was === undefined) {
          // delivered nothing yet: its subscribers read the log themselves, up to a seq this
          // store does not know, so its newest event goes out if the outage may have hidden it
          // (written since the previous LISTEN); a subscriber drops it if it has it, and reads
          // the gap from the log if it is further behind
          // (from the failed `turn/end` that ended its last turn, if the outage may have hidden it:
          // from the head, the position would pass it, and `withUntoldFailures` count it told)
          const failedAt = failures.get(sessionId);
          if (now.headSeq > 0 && now.writtenSince)
            unread.push({ sessionId, epoch: now.epoch, fromSeq: failedAt ?? now.headSeq });
        } else if (was.epoch !== now.epoch || was.seq < now.headSeq) {
          await this.catchUp(sessionId, was.epoch, was.seq + 1);
        }
      }
    }
    if (since && known)
      await this.rereadWritten(since, new Set(followed), known, new Set(unread.map((u) => u.sessionId)));
    for (const { sessionId, epoch, fromSeq } of unread)
      if (!this.closed) await this.catchUp(sessionId, epoch, fromSeq);
  }

  /**
   * The seq of the failed `turn/end` that ended the last turn of each session of `page` this store
   * delivered nothing of, when a transaction no older than `since` wrote it (not the session's
   * create) in the session's epoch now: one statement, reading only the sessions whose row says
   * their last turn failed and whose newest event is that young.
   */
  private async untoldFailuresOf(
    page: readonly string[],
    heads: ReadonlyMap<string, SessionHead>,
    since: Watermark | null,
  ): Promise<Map<string, number>> {
    const failed = page.filter((sessionId) => {
      const now = heads.get(sessionId);
      return now?.lastFailed && now.writtenSince && !now.retired && !this.delivered.has(sessionId);
    });
    const seqs = new Map<string, number>();
    if (!since) return seqs;
    for (const [sessionId, end] of await this.failedTurnEnds(failed, since))
      if (end.epoch === heads.get(sessionId)?.epoch) seqs.set(sessionId, end.event.seq);
    return seqs;
  }

  /**
   * The newest `turn/end` of each of `sessionIds` that a transaction no older than `since` wrote
   * (not the session's create), when it ended its turn `failed`; no statement for none.
   */
  private async failedTurnEnds(
    sessionIds: readonly string[],
    since: Watermark,
  ): Promise<Map<string, { epoch: string; event: SessionEvent }>> {
    const failed = new Map<string, { epoch: string; event: SessionEvent }>();
    if (sessionIds.length === 0) return failed;
    for (const [sessionId, end] of await this.reads.turnEndsSince(sessionIds, since.xid))
      if (end.event.type === "turn/end" && end.event.data.state === "failed") failed.set(sessionId, end);
    return failed;
  }

  /**
   * For store-wide listeners, after an outage, a page at a time: the sessions whose projection a
   * transaction no older than `since` wrote (created, renamed or acknowledged by another host
   * meanwhile) and whose row is not the version they were last given, as `meta` with the row, and
   * those such a transaction created that were not `known` (delivered before this re-read), as
   * `meta` marked `created`, as their create's NOTIFY would have been told; and those such a
   * transaction deleted, as `delete`, but not those `rereadAll` compared already (`followed`:
   * every session this host delivered something of, or that is followed here). A created session's
   * log is not read: the statement that reads a page of rows (at most `HEADS_PAGE`) looks up only
   * the first event of each; but a session whose row says its last turn failed, with the failure
   * not delivered here, gets that `turn/end` as an append (after its `created` mark), read by one
   * more statement for the page (see `withUntoldFailures`), so the host's sockets hear the failure.
   */
  private async rereadWritten(
    since: Watermark,
    followed: ReadonlySet<string>,
    known: ReadonlySet<string>,
    unread: ReadonlySet<string>,
  ): Promise<void> {
    await this.everyPage(
      async (after) =>
        this.withUntoldFailures(since, await this.reads.projectionsWrittenSince(since, after, HEADS_PAGE)),
      ({ read }) => read.projection.sessionId,
      ({ read, failure }) => {
        const { sessionId } = read.projection;
        // told as created even if `rereadAll` just delivered its newest events (followed here)
        const created = read.createdSince && !known.has(sessionId);
        if (created) this.deliverRead(sessionId, { kind: "meta", created: true }, read);
        // after the create, as its NOTIFYs would have told them; it carries the row
        if (failure)
          this.deliverRead(
            sessionId,
            { kind: "append", epoch: failure.epoch, events: [failure.event], remote: true },
            read,
          );
        // (a followed one delivered nothing of yet gets its rows, with the row, right after)
        else if (!created && !unread.has(sessionId) && this.shown.get(sessionId) !== read.version)
          this.deliverRead(sessionId, { kind: "meta" }, read);
        // its create's NOTIFY may still be handled (committed while this re-read ran); once a row
        // of it was delivered, that NOTIFY reads nothing anyway
        if (created && !this.delivered.has(sessionId))
          setNewest(this.toldCreated, sessionId, read.projection.epoch);
      },
    );
    const deleted: string[] = [];
    await this.everyPage(
      (after) => this.reads.retiredSince(since.xid, after, HEADS_PAGE),
      (sessionId) => sessionId,
      (sessionId) => {
        if (!followed.has(sessionId)) deleted.push(sessionId);
      },
    );
    for (const sessionId of deleted) await this.deliverRemoteDelete(sessionId);
  }

  /**
   * The rows of a page of `rereadWritten`, each with the failed `turn/end` that ended its last turn
   * if the outage hid it: one a transaction no older than `since` wrote (not the session's create:
   * a fork's copy is no news), above what was delivered of the session. `rereadAll` delivered
   * that of every session delivered here before; this finds it for the others (created meanwhile,
   * or never delivered here), which otherwise come back as a row alone. One statement per page,
   * reading only the sessions whose row says their last turn failed.
   */
  private async withUntoldFailures(
    since: Watermark,
    page: readonly WrittenProjection[],
  ): Promise<{ read: WrittenProjection; failure?: { epoch: string; event: SessionEvent } }[]> {
    const untold = (sessionId: string, epoch: string, seq: number) => {
      const head = this.delivered.get(sessionId);
      return head === undefined || head.epoch !== epoch || head.seq < seq;
    };
    const failed = page
      .map((read) => read.projection)
      .filter((p) => p.lastState === "failed" && untold(p.sessionId, p.epoch, p.seq))
      .map((p) => p.sessionId);
    const ends = await this.failedTurnEnds(failed, since);
    return page.map((read) => {
      const end = ends.get(read.projection.sessionId);
      return end && untold(read.projection.sessionId, end.epoch, end.event.seq)
        ? { read, failure: end }
        : { read };
    });
  }

  /**
   * Another host deleted the session: the notice carries its owner, read from the row a deleted
   * session keeps, so this host's sockets that may see it hear of it (§6 `session.removed`).
   */
  private async deliverRemoteDelete(sessionId: string): Promise<void> {
    const head = this.delivered.get(sessionId);
    if (!this.interested(sessionId) || (head !== undefined && head.seq < 0)) return;
    const owner = await this.reads.ownerOf(sessionId);
    this.deliver(
      sessionId,
      owner === null ? { kind: "delete" } : { kind: "delete", remote: { owner } },
      null,
    );
  }

  /** Reads pages in session id order while store-wide listeners remain, and hands each row to `tell`. */
  private everyPage<T>(
    read: (afterSessionId: string) => Promise<T[]>,
    idOf: (row: T) => string,
    tell: (row: T) => void,
  ): Promise<void> {
    return eachPage(read, "", HEADS_PAGE, idOf, tell, () => this.globalListeners > 0 && !this.closed);
  }

  /**
   * Synchronous unless another host appended to this session just before this commit and its
   * NOTIFY has not been handled yet: then this notice waits until those rows were read and
   * delivered, so a subscriber never sees a gap. Dropped once the session's delete was delivered
   * (a commit before a delete: its events are gone) and when nobody here follows the session.
   */
  private deliverLocal(local: HeldNotice): void {
    const { sessionId, notice, projection } = local.pending;
    const waiting = this.held.get(sessionId);
    if (waiting) {
      waiting.notices.push(local);
      if (waiting.owed && waiting.notices.length > MAX_OWED_HELD) this.releaseAsTheyAre(sessionId, waiting);
      return;
    }
    if (!this.interested(sessionId)) return;
    const head = this.delivered.get(sessionId);
    if (head !== undefined && head.seq < 0) return;
    const firstSeq = notice.kind === "append" ? (notice.events[0]?.seq ?? 0) : 0;
    if (
      head === undefined ||
      notice.kind !== "append" ||
      head.epoch !== notice.epoch ||
      firstSeq <= head.seq + 1
    ) {
      this.deliver(sessionId, notice, projection, local.version);
      return;
    }
    const hold: Hold = { notices: [local], epoch: head.epoch };
    this.held.set(sessionId, hold);
    this.remote = this.remote
      .then(() => this.catchUp(sessionId, head.epoch, head.seq + 1, false, firstSeq - 1))
      .then(
        () => {
          this.held.delete(sessionId);
          // through the same check again if the read delivered something, so every hold ends;
          // after a read that delivered nothing (its last subscriber left), as they are
          if (this.delivered.get(sessionId) !== head) this.releaseRead(hold);
          else for (const next of hold.notices) this.deliverAsItIs(next);
        },
        () => {
          // a closing store has no reconnect to wait for
          if (this.closed) this.releaseAsTheyAre(sessionId, hold);
          else this.owe(sessionId, hold);
        },
      );
  }

  /**
   * The catch-up read `hold` waited for failed (a lost connection): owed, as a NOTIFY's read
   * that failed is (see `heard`), since the rows it would have read may be the last the other
   * host writes to the session. The LISTEN starts again, and the notices wait for its re-read,
   * which reads every session followed here above what was delivered, these rows first
   * (`releaseOwed`). A host still committing to the session while its LISTEN connection cannot
   * come back would hold them without end: past `MAX_OWED_HELD` notices or `OWED_HOLD_MS` they
   * go out as they are, and the feed skips the rows they waited for (followers read the gap from
   * the log; store-wide listeners never hear of those rows).
   */
  private owe(sessionId: string, hold: Hold): void {
    hold.owed = setTimeout(() => this.releaseAsTheyAre(sessionId, hold), OWED_HOLD_MS);
    hold.owed.unref();
    if (hold.notices.length > MAX_OWED_HELD) this.releaseAsTheyAre(sessionId, hold);
    this.listenAgain();
  }

  /**
   * After a reconnect's re-read: the notices of every owed hold go through `deliverLocal` again,
   * so those the re-read delivered are dropped and the rest wait behind any row of another host
   * still unread. Each was owed before the re-read began: a catch-up fails, and a re-read runs,
   * on the one queue of remote work (`remote`).
   */
  private releaseOwed(): void {
    for (const [sessionId, hold] of [...this.held]) {
      if (!hold.owed) continue;
      this.endHold(sessionId, hold);
      this.releaseRead(hold);
    }
  }

  /**
   * A hold whose rows were read: each notice through `deliverLocal` again (another host may
   * have committed between two of them). An append of the epoch the hold began in is dropped
   * once a read delivered another epoch: a clear committed after it, so its events are gone,
   * and it would set the session's head back in the old epoch, making the next reads tell the
   * clear and the new epoch's events again.
   */
  private releaseRead(hold: Hold): void {
    for (const next of hold.notices) {
      const { sessionId, notice } = next.pending;
      const head = this.delivered.get(sessionId);
      const cleared = head !== undefined && head.epoch !== hold.epoch;
      if (!(cleared && notice.kind === "append" && notice.epoch === hold.epoch)) this.deliverLocal(next);
    }
  }

  /** A hold given up (past its bounds, or the store closing): its notices go out as they are. */
  private releaseAsTheyAre(sessionId: string, hold: Hold): void {
    if (this.held.get(sessionId) !== hold) return;
    this.endHold(sessionId, hold);
    for (const next of hold.notices) this.deliverAsItIs(next);
  }

  private endHold(sessionId: string, hold: Hold): void {
    this.held.delete(sessionId);
    clearTimeout(hold.owed);
  }

  private deliverAsItIs({ pending, version }: HeldNotice): void {
    this.deliver(pending.sessionId, pending.notice, pending.projection, version);
  }

  private async projectionFor(sessionId: string): Promise<VersionedProjection | null> {
    return this.globalListeners > 0 ? this.reads.versionedProjection(sessionId) : null;
  }

  private deliverRead(sessionId: string, notice: CommitNotice, read: VersionedProjection | null): void {
    this.deliver(sessionId, notice, read?.projection ?? null, read?.version);
  }

  /**
   * The one place notices reach listeners: drops what was delivered already, advances the head.
   * `version`: that of the projection row `projection` is, when known.
   */
  private deliver(
    sessionId: string,
    notice: CommitNotice,
    projection: SessionProjection | null,
    version?: number,
  ): void {
    if (!this.interested(sessionId)) return;
    const head = this.delivered.get(sessionId);
    let out = notice;
    if (notice.kind === "append" || notice.kind === "create") {
      const events =
        head !== undefined && head.epoch === notice.epoch
          ? notice.events.filter((event) => event.seq > head.seq)
          : notice.events;
      const last = events[events.length - 1];
      if (!last) return;
      if (events.length !== notice.events.length) out = { ...notice, events };
      this.remember(sessionId, { epoch: notice.epoch, seq: last.seq });
    } else if (notice.kind === "clear") {
      if (head !== undefined && head.epoch === notice.epoch) return;
      this.remember(sessionId, { epoch: notice.epoch, seq: 0 });
    } else if (notice.kind === "delete") {
      if (head !== undefined && head.seq < 0) return;
      this.remember(sessionId, { epoch: "", seq: -1 });
    }
    this.listeners.deliver([{ sessionId, notice: out, projection }]);
    if (notice.kind === "delete") this.shown.delete(sessionId);
    else if (projection !== null && version !== undefined) setNewest(this.shown, sessionId, version);
  }

  private remember(sessionId: string, head: Delivered): void {
    setNewest(this.delivered, sessionId, head);
  }

  /** The LISTEN connection dropped: reconnect with jittered backoff, then re-read what is followed. */
  private lost(client: pg.Client): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    client.end().catch(() => undefined);
    this.reconnectLater();
  }

  /**
   * Whichever attempt gets back in, what was committed while nobody listened is read: the
   * NOTIFYs of that time reached no one.
   */
  private reconnectLater(): void {
    if (this.closed) return;
    const delay = Math.random() * this.reconnectDelay;
    this.reconnectDelay = Math.min(RECONNECT_MAX_MS, this.reconnectDelay * 2);
    this.reconnectTimer = setTimeout(() => {
      this.start()
        .then(() => {
          if (this.closed) return;
          const before = this.listening?.before ?? null;
          this.remote = this.remote
            .then(() => this.rereadAll(before))
            .then(() => this.rereadDismissals(before ?? this.listening?.since ?? null))
            .then(() => (this.liveListeners > 0 ? this.live.rereadAll(before?.xid ?? null) : undefined))
            .then(
              () => {
                this.owedFrom = undefined;
                this.reconnectDelay = RECONNECT_MIN_MS;
                this.releaseOwed();
              },
              () => {
                // read again from the same start on the next connection, after a longer wait
                this.owedFrom ??= { from: before };
                this.listenAgain();
              },
            );
        })
        .catch(() => this.reconnectLater());
    }, delay);
  }
}
