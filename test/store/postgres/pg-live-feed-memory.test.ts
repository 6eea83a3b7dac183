import { describe, expect, it } from "vitest";
import { CommitListeners } from "../../../src/store/commit-listeners.js";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import { PgLiveFeed } from "../../../src/store/postgres/pg-live-feed.js";
import { PgLiveReads } from "../../../src/store/postgres/pg-live-rows.js";
import { openPool } from "../../../src/store/postgres/pg-pool.js";
import { pgUrl } from "../contract/backends.js";

/**
 * What a host's live feed announced is remembered per session so each change is announced once;
 * that memory is bounded (50,000 entries per kind), so a host that saw many sessions does not
 * grow for ever: the entry announced longest ago is forgotten first, and at worst its next notice
 * repeats. Lease notices of this host's own commits exercise it: they need no read.
 */
const describePg = pgUrl ? describe : describe.skip;
const REMEMBERED = 50_000;

const lease = (sessionId: string, generation: number): LiveStateNotice => ({
  kind: "lease",
  owner: "alice",
  sessionId,
  hostId: "host-a",
  generation,
});

describePg("PostgreSQL live feed memory", () => {
  it("forgets the session announced longest ago past 50,000, keeping one whose lease changed since", async () => {
    // never queried: own lease notices are announced from memory alone
    const pool = openPool(pgUrl!, { max: 1 });
    try {
      const listeners = new CommitListeners();
      const heard: string[] = [];
      listeners.subscribeLive((notice) => {
        if (notice.kind === "lease") heard.push(`${notice.sessionId}@${notice.generation}`);
      });
      const feed = new PgLiveFeed(listeners, new PgLiveReads(pool));
      const announce = (sessionId: string, generation: number) => {
        const before = heard.length;
        feed.local([{ notice: lease(sessionId, generation) }]);
        return heard.length > before;
      };
      for (let i = 0; i < REMEMBERED; i++) feed.local([{ notice: lease(`s${i}`, 1) }]);
      expect(heard).toHaveLength(REMEMBERED);
      // s1 changes: it becomes the most recent entry, and nothing is forgotten for it
      expect(announce("s1", 2)).toBe(true);
      expect(announce("s0", 1)).toBe(false);
      // one session more than the memory holds: s0, the oldest, goes
      expect(announce(`s${REMEMBERED}`, 1)).toBe(true);
      expect(announce("s0", 1)).toBe(true);
      // that pushed out s2 (s1 had moved up), never s1
      expect(announce("s1", 2)).toBe(false);
      expect(announce("s3", 1)).toBe(false);
      expect(announce("s2", 1)).toBe(true);
    } finally {
      await pool.end();
    }
  });
});
