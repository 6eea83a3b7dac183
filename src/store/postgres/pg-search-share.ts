/**
 * The connections of the store's read pool that searches may hold at once: half of it, at least
 * one. Every read of the host (pages, lists, the commit feed's re-reads, attachments) and its
 * lease renewals and purges take their connections from that pool; a search holds one for up to
 * two statement timeouts (10 s each), so one principal's searches in flight held all ten: on
 * 300,000 messages (tables analyzed) 64 of them made another principal's `session.list`,
 * `session.page` and `session.rename` wait 1.5–3.6 s, and with the planner misjudging them
 * (before the tables' statistics were read, each search 6–10 s) about 10 s.
 */
export function searchConnections(poolSize: number): number {
  return Math.max(1, Math.floor(poolSize / 2));
}
