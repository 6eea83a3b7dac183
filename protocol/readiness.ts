/**
 * The body of `GET /readyz` (protocol-v1 §9). `/readyz` needs no token, so a reason never carries
 * the database's own words (an address, a path, a server's message): those go to the host's log.
 */
export const NotReadyReasons = {
  not_checked: "not checked yet",
  db_unavailable: "database unavailable",
  store_writes_failing: "store writes failing",
  check_stale: "last check is stale",
  shutting_down: "shutting down",
  build_outdated: "database schema newer than this build",
} as const;
export type NotReadyCode = keyof typeof NotReadyReasons;

export interface Readiness {
  ready: boolean;
  /** Epoch ms of the last check; 0 before the first one. */
  checkedAt: number;
  /** Why the host is not ready, for people: `NotReadyReasons[code]`. */
  reason?: string;
  /** Why the host is not ready, for programs. */
  code?: NotReadyCode;
}

export function notReady(code: NotReadyCode, checkedAt: number): Readiness {
  return { ready: false, checkedAt, reason: NotReadyReasons[code], code };
}
