import type { SessionRow } from "../../protocol/index.js";
import type { ConsoleLink, ListChange } from "./console-link.js";
import type { SessionCache } from "./session-cache.js";
import { LIST_SIZE, MAX_PINNED } from "./session-list-order.js";

/**
 * The rows the list draws from: a `session.list` snapshot kept current by §6 notifications and
 * by control projections. Notifications carry no sequence, so after a reconnect the snapshot is
 * fetched again; a snapshot that returns after a local or notified change is refetched rather
 * than applied over the newer rows.
 *
 * Sessions this principal dismissed are kept apart (`dismissed`): notifications and control
 * projections still describe them (they keep running), so a row known dismissed goes there and
 * never back into the list until restored.
 */
export class SessionListModel {
  readonly rows = new Map<string, SessionRow>();
  readonly dismissed = new Map<string, SessionRow>();
  /** The host has older sessions than the last snapshot held: the list is not all there is. */
  older = false;
  /** Sessions this tab saw deleted: a late snapshot or projection never brings them back. */
  private readonly removed = new Set<string>();
  private version = 0;
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

  async refresh(): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const version = this.version;
      const [recent, parked, dismissed] = await Promise.all([
        this.link.list(LIST_SIZE),
        this.link.list(MAX_PINNED, { parked: true }),
        this.link.list(LIST_SIZE, { dismissed: true }),
      ]);
      if (version !== this.version) continue;
      this.fresh = true;
      this.older = recent.next !== undefined;
      this.rows.clear();
      this.dismissed.clear();
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

  apply(change: ListChange): void {
    if (change.kind === "agent-error") return;
    this.version += 1;
    if (change.kind === "removed") {
      this.removed.add(change.sessionId);
      this.rows.delete(change.sessionId);
      this.dismissed.delete(change.sessionId);
    } else if (change.kind === "dismissed") {
      this.setDismissed(change.row, change.dismissed);
    } else if (!this.removed.has(change.row.sessionId)) {
      this.place(change.row);
    }
    this.changed();
  }

  /** Moves a row between the list and the dismissed ones (a local action, or another tab's). */
  setDismissed(row: SessionRow, dismissed: boolean): void {
    this.version += 1;
    if (this.removed.has(row.sessionId)) return;
    const newest = (dismissed ? this.rows : this.dismissed).get(row.sessionId) ?? row;
    const current = newest.seq > row.seq ? newest : row;
    this.rows.delete(row.sessionId);
    this.dismissed.delete(row.sessionId);
    (dismissed ? this.dismissed : this.rows).set(row.sessionId, current);
    this.changed();
  }

  /** The row a session shows, in whichever of the two lists it is in. */
  row(sessionId: string): SessionRow | undefined {
    return this.rows.get(sessionId) ?? this.dismissed.get(sessionId);
  }

  private place(row: SessionRow): void {
    (this.dismissed.has(row.sessionId) ? this.dismissed : this.rows).set(row.sessionId, row);
  }

  /** A live projection from the control stream; the row with the higher watermark wins. */
  project(row: SessionRow): void {
    const current = this.row(row.sessionId);
    if (this.removed.has(row.sessionId) || current === row) return;
    if (current && current.seq > row.seq) return;
    if (current && JSON.stringify(current) === JSON.stringify(row)) return;
    this.place(row);
    this.changed();
  }

  private changed(): void {
    // only the list is cached: a reload paints it at once, dismissed rows come with the snapshot
    void this.cache.saveRows([...this.rows.values()]);
    this.onChange();
  }
}
