import type { LeaseHolder, SessionLease } from "./session-lease.js";

/** A session's lease row as both stores keep it; `hostId` null once released. */
export interface LeaseRow {
  hostId: string | null;
  generation: number;
  /** Epoch milliseconds by the store's clock. */
  expiresAt: number;
}

/** What taking a lease does, decided from the row both stores read inside the transaction. */
export type AcquireDecision =
  | { kind: "renew"; generation: number }
  /** A new generation; `takeoverFrom` names the host whose lease expired (null: the lease was free). */
  | { kind: "take"; generation: number; takeoverFrom: string | null }
  | { kind: "held"; holder: LeaseHolder };

/** The rules of `SessionLeaseStore.acquireLease`, the same on every store. */
export function decideAcquire(
  sessionId: string,
  row: LeaseRow | undefined,
  hostId: string,
  now: number,
): AcquireDecision {
  if (!row) return { kind: "take", generation: 1, takeoverFrom: null };
  const generation = row.generation + 1;
  if (row.hostId === null) return { kind: "take", generation, takeoverFrom: null };
  if (row.expiresAt > now) {
    if (row.hostId === hostId) return { kind: "renew", generation: row.generation };
    return {
      kind: "held",
      holder: { sessionId, hostId: row.hostId, generation: row.generation, expiresAt: row.expiresAt },
    };
  }
  return { kind: "take", generation, takeoverFrom: row.hostId };
}

/** A fence (or a renewal) holds only while it is the session's current, unexpired lease. */
export function leaseIsCurrent(row: LeaseRow | undefined, lease: SessionLease, now: number): boolean {
  return (
    row !== undefined &&
    row.hostId === lease.hostId &&
    row.generation === lease.generation &&
    row.expiresAt > now
  );
}

/** Whether another host than `hostId` (any host when undefined) holds the lease unexpired. */
export function heldElsewhere(row: LeaseRow | undefined, hostId: string | undefined, now: number): boolean {
  return row !== undefined && row.hostId !== null && row.expiresAt > now && row.hostId !== hostId;
}

/** TTLs are whole milliseconds of at least one; anything else is a caller's bug. */
export function checkTtl(ttlMs: number): void {
  if (!Number.isSafeInteger(ttlMs) || ttlMs < 1)
    throw new RangeError(`lease ttl ${ttlMs} ms is not a positive integer`);
}
