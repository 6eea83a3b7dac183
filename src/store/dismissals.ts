/**
 * "Keep running" dismissal: a principal takes a session off their own list. Nothing about the
 * session changes (its log, its agent, its queue); only whose list shows it. Rows are keyed by
 * the principal's name, the name the store records as a session's owner, so a dismissal survives
 * restarts and follows the principal across sockets and hosts.
 */
export interface DismissalStore {
  /** Records the dismissal; `changed` is false when it was already recorded. */
  dismiss(sessionId: string, principal: string, at: number): Promise<DismissalOutcome>;
  /** Removes the dismissal; `changed` is false when there was none. */
  restore(sessionId: string, principal: string): Promise<DismissalOutcome>;
  isDismissed(sessionId: string, principal: string): Promise<boolean>;
  /**
   * Dismissals and restores another host sharing the store made (PostgreSQL), each told once:
   * as it heard them, and after its feed of other hosts' commits was down, those made meanwhile
   * by a principal `watched` names (read from the table). A store no other host writes has none.
   */
  subscribeDismissals?(
    listener: (change: DismissalChange) => void,
    watched: () => Iterable<string>,
  ): () => void;
  /**
   * Called once a principal is watched: the dismissals it has now are remembered, so a restore
   * of one made on another host while this store heard nothing is found and told.
   */
  rememberDismissals?(principal: string): Promise<void>;
}

/** A principal dismissed (`dismissed`) or restored a session, on another host. */
export interface DismissalChange {
  sessionId: string;
  principal: string;
  dismissed: boolean;
}

/** `not_found`: no live session by that id (never created, or deleted). */
export type DismissalOutcome = { status: "ok"; changed: boolean } | { status: "not_found" };

/**
 * `list` sees sessions through one principal's dismissals: without `dismissed` (or `false`) it
 * leaves out what `principal` dismissed, with `true` it shows only that.
 */
export interface DismissalFilter {
  principal: string;
  dismissed: boolean;
}

/** The SQL condition a list query adds for `filter`; `?` takes the principal's name. */
export function dismissalCondition(filter: DismissalFilter, placeholder: string): string {
  const exists = `EXISTS (SELECT 1 FROM dismissals d WHERE d.principal = ${placeholder} AND d.session_id = projections.session_id)`;
  return filter.dismissed ? exists : `NOT ${exists}`;
}
