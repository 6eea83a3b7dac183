import type { SessionRow } from "../../protocol/index.js";
import { replacesRow } from "../../src/client/row-watermark.js";
import type { ConsoleLink, ListChange } from "./console-link.js";
import { RetryWait } from "./retry-wait.js";
import type { SessionCache } from "./session-cache.js";
import { LIST_SIZE, type ListPosition, MAX_PINNED, orderSessions } from "./session-list-order.js";
import type { ListView } from "./session-list-view.js";

/** How far one of the two lists is read from the host. */
interface Pages {
  /** The host's cursor for the next older page; undefined once the last page is loaded. */
  cursor: string | undefined;
  /** The last row of the last page loaded while older ones are not. */
  end: ListPosition | undefined;
  /** How many pages are loaded: a fresh snapshot after a reconnect loads as many. */
  count: number;
  /** The next older page is being read: one at a time. */
  loading: boolean;
}

const parked = (row: SessionRow) => row.lastState === "input-required";

/** How many deleted sessions a tab keeps off the list by id: far more than can be deleted within a call's timeout. */
export const REMOVED_KEPT = 1000;

const firstPage = (): Pages => ({ cursor: undefined, end: undefined, count: 1, loading: false });

/**
 * The rows the list draws from: a `session.list` snapshot kept current by §6 notifications and
 * by control projections. Notifications carry no sequence, so after a reconnect the snapshot is
 * fetched again; a snapshot that returns after a local or notified change is refetched rather
 * than applied over the newer rows.
 *
 * Sessions this principal dismissed are kept apart (`dismissed`): notifications and control
 * projections still describe them (they keep running), so a row known dismissed goes there and
 * never back into the list until restored.
 *
 * The list, and the dismissed sessions, come a page at a time, older pages on request
 * (`loadOlder`), each read with the host's cursor from the page above. Rows are kept by session
 * id and the newer row of a session wins, so a session that moves between pages while they load
 * (a prompt brings it to the top) is listed once, where the host now puts it.
 *
 * A live row (a notification, a projection) of a session neither list holds may be one on a
 * dismissed page not loaded yet: it is held aside (`unplaced`), shown in neither list, until a
 * page or a dismissal notification says where it goes, or the dismissed pages loaded reach past it.
 * One held aside that waits on its owner (parked) is not left to wait for a page the user may
 * never scroll to: the host's parked sessions not dismissed (what a snapshot pins) are read again,
 * and if they name it, it goes on the list, pinned; if not, it is dismissed (or no longer parked)
 * and stays aside.
 */
export class SessionListModel {
  readonly rows = new Map<string, SessionRow>();
  readonly dismissed = new Map<string, SessionRow>();
  /** Rows of sessions that may be dismissed on a page not loaded yet: shown in neither list. */
  private readonly unplaced = new Map<string, SessionRow>();
  private readonly pages: Record<ListView, Pages> = { list: firstPage(), dismissed: firstPage() };
  /**
   * The host's parked sessions not dismissed, read `MAX_PINNED` at a time: the first page with each
   * snapshot, more on request (`loadMorePinned`). Each page loaded pins `MAX_PINNED` more.
   */
  private readonly pinnedPages: Pages = firstPage();
  /**
   * The version at which this tab last learnt each session's dismissal (its own action or a
   * notification): a dismissed page read before that never moves the session back.
   */
  private readonly dismissalLearnt = new Map<string, number>();
  /**
   * The version at which this tab learnt each session was cleared (a row at seq 0: its new log is
   * empty): a page read before that never brings back the old log's row, whose seq is higher.
   */
  private readonly clearLearnt = new Map<string, number>();
  /**
   * Sessions this tab saw deleted: a late snapshot or projection never brings them back. Only the
   * latest `REMOVED_KEPT` (in the order learnt) are kept: one is needed while a read begun before its
   * delete may still answer, or while the live state holds its row before the host's notice (each
   * ends within a call's timeout), and a long-lived tab on a busy host hears of deletes without end.
   */
  private readonly removed = new Set<string>();
  private version = 0;
  /** Counts the snapshots applied: a read of parked sessions that one came after is dropped. */
  private snapshots = 0;
  /** A read of the parked sessions for rows held aside is under way; `again`: one more is due after it. */
  private parkedRead: { again: boolean } | undefined;
  private readonly parkedRetry = new RetryWait();
  /** The wait before the parked sessions are read again after a failed read. */
  private parkedRetryTimer: ReturnType<typeof setTimeout> | undefined;
  /** Replaced (a new token): nothing more is read, and no wait is left to fire. */
  private disposed = false;
  /** Set by the first snapshot from the host: cached rows arriving later are older, and dropped. */
  private fresh = false;

  constructor(
    private readonly link: ConsoleLink,
    private readonly cache: SessionCache,
    private readonly onChange: () => void,
  ) {
    const version = this.version;
    void cache.loadRows().then((rows) => {
      if (this.fresh || version !== this.version || rows.length === 0) return;
      for (const row of rows) this.rows.set(row.sessionId, row);
      this.onChange();
    });
  }

  /**
   * Where the list stops while older sessions are not loaded: rows known past it (control
   * projections describe every session) wait for their page. Before the host's first snapshot,
   * as far as one page reaches.
   */
  get end(): ListPosition | undefined {
    if (this.fresh) return this.pages.list.end;
    const { recent } = orderSessions(this.rows.values());
    return recent.length > LIST_SIZE ? recent[LIST_SIZE - 1] : undefined;
  }

  /** The host has sessions older than the rows loaded so far. */
  get older(): boolean {
    return this.hasOlder("list");
  }

  hasOlder(view: ListView): boolean {
    return this.pages[view].cursor !== undefined;
  }

  isLoadingOlder(view: ListView): boolean {
    return this.pages[view].loading;
  }

  /** How many sessions waiting on their owner are pinned on top of the list. */
  get pinnedLimit(): number {
    return MAX_PINNED * this.pinnedPages.count;
  }

  /**
   * More sessions wait on the principal than the list shows: parked rows known here that stand
   * neither among the pins nor within the pages loaded, or parked sessions the host has past those
   * read that may be such rows (the list has older pages not loaded, or a parked row is held aside).
   */
  get morePinned(): boolean {
    const end = this.end;
    const unknownPastEnd = end !== undefined || [...this.unplaced.values()].some(parked);
    if (this.pinnedPages.cursor !== undefined && unknownPastEnd) return true;
    const { pinned, recent } = orderSessions(this.rows.values(), end, this.pinnedLimit);
    let parkedShown = pinned.length;
    for (const row of recent) if (parked(row)) parkedShown += 1;
    for (const row of this.rows.values()) if (parked(row) && --parkedShown < 0) return true;
    return false;
  }

  get isLoadingPinned(): boolean {
    return this.pinnedPages.loading;
  }

  /**
   * Pins `MAX_PINNED` more of the sessions waiting on the principal, reading the host's next page
   * of them when it has one. A page read before a refresh is dropped, as `loadOlder`'s is.
   */
  async loadMorePinned(): Promise<void> {
    const pages = this.pinnedPages;
    if (pages.loading) return;
    const cursor = pages.cursor;
    pages.loading = true;
    this.onChange();
    const version = this.version;
    try {
      if (cursor !== undefined) {
        const page = await this.link.list(MAX_PINNED, { parked: true, before: cursor });
        if (cursor !== pages.cursor) return;
        this.setCursor(pages, page.next, page.sessions);
        for (const row of page.sessions) this.addListed(row, version);
      }
      pages.count += 1;
    } finally {
      pages.loading = false;
      this.changed();
    }
  }

  /** Where a list stops while its older sessions are not loaded. */
  endOf(view: ListView): ListPosition | undefined {
    return view === "list" ? this.end : this.pages.dismissed.end;
  }

  async refresh(): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const version = this.version;
      const [recent, parked, dismissed] = await Promise.all([
        this.readPages(this.pages.list.count, {}),
        this.readPages(this.pinnedPages.count, { parked: true }, MAX_PINNED),
        this.readPages(this.pages.dismissed.count, { dismissed: true }),
      ]);
      if (version !== this.version) continue;
      this.fresh = true;
      this.snapshots += 1;
      this.setCursor(this.pages.list, recent.next, recent.sessions);
      this.setCursor(this.pages.dismissed, dismissed.next, dismissed.sessions);
      this.setCursor(this.pinnedPages, parked.next, parked.sessions);
      this.rows.clear();
      this.dismissed.clear();
      this.unplaced.clear();
      for (const row of dismissed.sessions) {
        if (!this.removed.has(row.sessionId)) this.dismissed.set(row.sessionId, row);
      }
      for (const row of [...recent.sessions, ...parked.sessions]) {
        if (!this.removed.has(row.sessionId) && !this.dismissed.has(row.sessionId))
          this.rows.set(row.sessionId, row);
      }
      this.changed();
      return;
    }
  }

  /**
   * Reads the next older page of a list and adds its rows. A page read before a refresh, or one
   * a quicker call already added, is dropped: the cursor it was read with is no longer the list's.
   */
  async loadOlder(view: ListView = "list"): Promise<void> {
    const pages = this.pages[view];
    const cursor = pages.cursor;
    if (cursor === undefined || pages.loading) return;
    pages.loading = true;
    this.onChange();
    const version = this.version;
    try {
      const filter = view === "dismissed" ? { dismissed: true as const } : {};
      const page = await this.link.list(LIST_SIZE, { ...filter, before: cursor });
      if (cursor !== pages.cursor) return;
      pages.count += 1;
      this.setCursor(pages, page.next, page.sessions);
      for (const row of page.sessions) {
        if (view === "list") this.addListed(row, version);
        else this.addDismissed(row, version);
      }
      // the dismissed pages now reach past rows held aside that this one did not bring: listed
      if (view === "dismissed") for (const row of [...this.unplaced.values()]) this.place(row);
    } finally {
      pages.loading = false;
      this.changed();
    }
  }

  private addListed(row: SessionRow, readAt: number): void {
    if (this.removed.has(row.sessionId) || this.dismissed.has(row.sessionId)) return;
    const current = this.rows.get(row.sessionId) ?? this.unplaced.get(row.sessionId);
    this.unplaced.delete(row.sessionId);
    // a notification or projection that came while the page was read is newer than its row, and
    // so is any row of a session cleared since the read began (its new log's seq starts again)
    const clearedSince = (this.clearLearnt.get(row.sessionId) ?? -1) > readAt;
    this.rows.set(row.sessionId, current && (current.seq >= row.seq || clearedSince) ? current : row);
  }

  /**
   * A row of a dismissed page. Control projections describe every session, so it may be known
   * in the list already: the page says it is dismissed, unless this tab learnt since the read
   * began that it was restored.
   */
  private addDismissed(row: SessionRow, readAt: number): void {
    if (this.removed.has(row.sessionId)) return;
    if ((this.dismissalLearnt.get(row.sessionId) ?? -1) > readAt) return;
    const current = this.row(row.sessionId) ?? this.unplaced.get(row.sessionId);
    this.rows.delete(row.sessionId);
    this.unplaced.delete(row.sessionId);
    const clearedSince = (this.clearLearnt.get(row.sessionId) ?? -1) > readAt;
    this.dismissed.set(row.sessionId, current && (current.seq > row.seq || clearedSince) ? current : row);
  }

  /** The first `count` pages of a list, read one after another with the host's cursors. */
  private async readPages(
    count: number,
    filter: { dismissed?: true; parked?: true },
    size = LIST_SIZE,
  ): Promise<{ sessions: SessionRow[]; next?: string }> {
    const sessions: SessionRow[] = [];
    let next: string | undefined;
    for (let page = 0; page < count; page++) {
      const answer = await this.link.list(size, next === undefined ? filter : { ...filter, before: next });
      sessions.push(...answer.sessions);
      next = answer.next;
      if (next === undefined) break;
    }
    return next === undefined ? { sessions } : { sessions, next };
  }

  private setCursor(pages: Pages, next: string | undefined, page: SessionRow[]): void {
    pages.cursor = next;
    const last = page[page.length - 1];
    pages.end =
      next !== undefined && last ? { updatedAt: last.updatedAt, sessionId: last.sessionId } : undefined;
  }

  apply(change: ListChange): void {
    if (change.kind === "agent-error") return;
    this.version += 1;
    if (change.kind === "removed") {
      // learnt again: the newest, last to be forgotten
      this.removed.delete(change.sessionId);
      this.removed.add(change.sessionId);
      if (this.removed.size > REMOVED_KEPT) this.removed.delete(this.removed.values().next().value as string);
      this.rows.delete(change.sessionId);
      this.dismissed.delete(change.sessionId);
      this.unplaced.delete(change.sessionId);
    } else if (change.kind === "dismissed") {
      this.setDismissed(change.row, change.dismissed);
    } else if (!this.removed.has(change.row.sessionId)) {
      this.place(change.row);
    }
    this.changed();
  }

  /**
   * A delete made here failed: the host may still have the session (the call was refused, or its
   * socket died on the way), so it is no longer kept off the list; the next snapshot says whether
   * it is there.
   */
  deleteFailed(sessionId: string): void {
    this.version += 1;
    this.removed.delete(sessionId);
  }

  /** Moves a row between the list and the dismissed ones (a local action, or another tab's). */
  setDismissed(row: SessionRow, dismissed: boolean): void {
    this.version += 1;
    this.dismissalLearnt.set(row.sessionId, this.version);
    if (this.removed.has(row.sessionId)) return;
    const newest =
      (dismissed ? this.rows : this.dismissed).get(row.sessionId) ?? this.unplaced.get(row.sessionId) ?? row;
    const current = newest.seq > row.seq ? newest : row;
    this.rows.delete(row.sessionId);
    this.dismissed.delete(row.sessionId);
    this.unplaced.delete(row.sessionId);
    (dismissed ? this.dismissed : this.rows).set(row.sessionId, current);
    this.changed();
  }

  /** The row a session shows, in whichever of the two lists it is in. */
  row(sessionId: string): SessionRow | undefined {
    return this.rows.get(sessionId) ?? this.dismissed.get(sessionId);
  }

  /**
   * Puts a live row where its session is: in the list that holds it; else on the list, unless it
   * stands past the dismissed pages loaded, where one of them not loaded yet may hold it: aside.
   * (A new session, or one a prompt moved, stands on top: the first dismissed page reaches it.)
   * Before the host's first snapshot nothing is known dismissed: the snapshot sorts them.
   */
  private place(row: SessionRow): void {
    const id = row.sessionId;
    if (this.dismissed.has(id)) this.dismissed.set(id, row);
    else if (this.rows.has(id) || !this.fresh || !this.pastDismissedEnd(row)) {
      this.unplaced.delete(id);
      this.rows.set(id, row);
    } else {
      const held = this.unplaced.get(id);
      this.unplaced.set(id, row);
      if (parked(row) && !(held && parked(held))) void this.placeParked();
    }
  }

  /**
   * Places the rows held aside that wait on their owner and are not dismissed: read from the host's
   * parked sessions this principal has not dismissed, the ones a snapshot pins. A session that list
   * does not name is dismissed, or no longer parked, and stays aside. Its answer says only that a
   * session was not dismissed when read: a dismissal learnt meanwhile has taken the row out of
   * those held aside already, and a snapshot that came after it replaces it. One read at a time;
   * a row parked during it is asked about by another once it is answered. A call lost with the
   * socket is sent again by the client; one that fails is made again after a wait (2 s, doubling
   * up to a minute) for as long as a parked row is held aside.
   */
  private async placeParked(): Promise<void> {
    if (this.disposed) return;
    if (this.parkedRead) {
      this.parkedRead.again = true;
      return;
    }
    const read = { again: true };
    this.parkedRead = read;
    try {
      while (read.again && [...this.unplaced.values()].some(parked)) {
        read.again = false;
        const snapshots = this.snapshots;
        const readAt = this.version;
        const pinnedPages = this.pinnedPages.count;
        const { sessions, next } = await this.readPages(pinnedPages, { parked: true }, MAX_PINNED);
        if (this.disposed) return;
        // the snapshot cleared the rows held aside and pinned its own read of the parked sessions
        if (snapshots !== this.snapshots) continue;
        // one that stands past the pages pinned stays aside, and the list offers the next page
        if (pinnedPages === this.pinnedPages.count) this.setCursor(this.pinnedPages, next, sessions);
        const held = sessions.filter((row) => this.unplaced.has(row.sessionId));
        for (const row of held) this.addListed(row, readAt);
        if (held.length > 0) this.changed();
      }
      this.parkedRetry.reset();
    } catch {
      // the call timed out or the host refused it: asked again after a wait, while one is held
      if (!this.disposed)
        this.parkedRetryTimer = setTimeout(() => {
          this.parkedRetryTimer = undefined;
          void this.placeParked();
        }, this.parkedRetry.next());
    } finally {
      this.parkedRead = undefined;
    }
  }

  /** This model is replaced: a pending wait to read the parked sessions again is cleared, and none is started. */
  dispose(): void {
    this.disposed = true;
    clearTimeout(this.parkedRetryTimer);
    this.parkedRetryTimer = undefined;
  }

  /** `row` stands where a dismissed page not loaded yet may hold it. */
  private pastDismissedEnd(row: SessionRow): boolean {
    const end = this.pages.dismissed.end;
    return end !== undefined && orderSessions([row], end, 0).recent.length === 0;
  }

  /**
   * A live projection from the control stream, held by the control mirror's rule (`replacesRow`):
   * the row with the higher watermark wins, except a cleared session's row at seq 0.
   */
  project(row: SessionRow): void {
    const current = this.row(row.sessionId) ?? this.unplaced.get(row.sessionId);
    if (this.removed.has(row.sessionId) || current === row || !replacesRow(current, row)) return;
    // a row below the one held that still replaces it is the session just cleared
    const cleared = current !== undefined && current.seq > row.seq;
    if (current && JSON.stringify(current) === JSON.stringify(row)) return;
    if (cleared) {
      this.version += 1;
      this.clearLearnt.set(row.sessionId, this.version);
    }
    this.place(row);
    this.changed();
  }

  private changed(): void {
    // Only the list is cached: a reload paints it at once, dismissed rows come with the snapshot.
    // Only its first page's rows: a reload reads one page, and the rows known past the pages
    // loaded (control projections) would otherwise be painted, then taken away by the snapshot.
    const { pinned, recent } = orderSessions(this.rows.values(), this.end);
    void this.cache.saveRows([...pinned, ...recent.slice(0, LIST_SIZE)]);
    this.onChange();
  }
}
