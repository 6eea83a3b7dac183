import type pg from "pg";
import { checkTtl } from "../lease-rules.js";
import type { RenewOutcome, SessionLease } from "../session-lease.js";
import type { WriteHealth } from "../write-health.js";
import { isPgRetryable, isPgStorageFailure, pgPersistenceFailure } from "./pg-errors.js";
import { idempotentQuery } from "./pg-idle-lost.js";
import { DB_NOW } from "./pg-live-rows.js";
import type { PgSchemaFence } from "./pg-schema-fence.js";

/**
 * Extends each listed lease still held by this host with this generation and not expired (by the
 * database clock when the statement starts); the rows it extended. Row locks are taken as the
 * UPDATE finds the rows: a takeover in flight (it holds the row `FOR UPDATE`) is waited for, and the
 * row is judged again as it committed, so a lease taken meanwhile is not renewed.
 */
const RENEW = `UPDATE leases l SET expires_at = ${DB_NOW} + $2 FROM unnest($3::text[], $4::bigint[]) AS v(session_id, generation)
  WHERE l.session_id = v.session_id AND l.generation = v.generation AND l.host_id = $1 AND l.expires_at > ${DB_NOW}
  RETURNING l.session_id, l.generation`;

/** A renewal that lost a lock race (a deadlock with a takeover) is run again this many times. */
const RACE_RETRIES = 3;

/**
 * Lease renewals on PostgreSQL, each one fenced UPDATE in a transaction of its own on a pooled
 * connection, outside the group commit: a renewal never waits for this host's appends (a large
 * batch, or one waiting on a row lock), so a host under write load keeps the leases it holds.
 * Fencing needs no batch: the UPDATE only extends a lease that is still current, a takeover locks
 * the row, and a renewal only moves an expiry later, so a batch's lease readings (taken with the
 * session's lock, see `PgWriteBatch.lease`) can only turn out more current than read, and the
 * check of a batch on kept states reads the row at COMMIT.
 */
export class PgLeaseRenewal {
  constructor(
    private readonly pool: pg.Pool,
    /**
     * The store's write health: a renewal refused on storage counts; one that commits clears
     * nothing, for an updated lease row may fit where an append does not.
     */
    private readonly health: WriteHealth,
    /**
     * Refuses renewals as it refuses writes (see `PgSchemaFence`): a host whose build may no
     * longer write lets its leases lapse, so hosts of the newer build take its sessions over.
     */
    private readonly fence: PgSchemaFence,
  ) {}

  /** Throws a bad lease time at once, as `acquire` does: a caller's bug, before anything runs. */
  renew(hostId: string, leases: readonly SessionLease[], ttlMs: number): Promise<RenewOutcome> {
    checkTtl(ttlMs);
    const refused = this.fence.refusal();
    if (refused) return Promise.reject(refused);
    return this.renewChecked(hostId, leases, ttlMs);
  }

  private async renewChecked(
    hostId: string,
    leases: readonly SessionLease[],
    ttlMs: number,
  ): Promise<RenewOutcome> {
    if (leases.length === 0) return { renewed: [], lost: [] };
    // a lease in another host's name is lost, and left as it is
    const own = leases.filter((lease) => lease.hostId === hostId);
    const rows = own.length === 0 ? [] : await this.extend(hostId, own, ttlMs);
    const kept = new Set(rows.map((row) => `${row.session_id}\u0000${row.generation}`));
    const outcome: RenewOutcome = { renewed: [], lost: [] };
    for (const lease of leases) {
      const current = lease.hostId === hostId && kept.has(`${lease.sessionId}\u0000${lease.generation}`);
      (current ? outcome.renewed : outcome.lost).push(lease);
    }
    return outcome;
  }

  private async extend(
    hostId: string,
    own: readonly SessionLease[],
    ttlMs: number,
    attempt = 0,
  ): Promise<{ session_id: string; generation: number }[]> {
    try {
      // sent again where its connection died while idle (a blip, see `idempotentQuery`): one that
      // ran unseen extended each lease it names, so the second finds them still current and
      // extends them again from its own clock, answering the same rows; one that runs after a
      // lease expired meanwhile answers it lost, which it is
      const { rows } = await idempotentQuery<{ session_id: string; generation: number }>(this.pool, RENEW, [
        hostId,
        ttlMs,
        own.map((lease) => lease.sessionId),
        own.map((lease) => lease.generation),
      ]);
      return rows;
    } catch (err) {
      if (isPgRetryable(err) && attempt < RACE_RETRIES) return this.extend(hostId, own, ttlMs, attempt + 1);
      if (!isPgStorageFailure(err)) throw err;
      this.health.failed(err);
      throw pgPersistenceFailure(err);
    }
  }
}
