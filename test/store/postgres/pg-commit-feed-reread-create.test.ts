import { describe, expect, it } from "vitest";
import type { PgReads } from "../../../src/store/postgres/pg-reads.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { notifiesHandled, twoHostsFixture } from "./two-hosts.js";

/**
 * A session another host creates while this host's re-read after an outage runs is found by that
 * re-read (its row was written since the previous LISTEN) and told to store-wide listeners as
 * created; the create's own NOTIFY, heard meanwhile and handled after the re-read, tells it no
 * more (the list notifier's `session.added` goes out once).
 */
const openHosts = twoHostsFixture("feed_reread_create");
const WAIT = { timeout: 20_000 };

describe.skipIf(!pgUrl)("PostgreSQL commit feed: a create committed while the outage re-read runs", () => {
  it("is told as created once", async () => {
    const { a, b } = await openHosts();
    const added: string[] = [];
    b.subscribeAll((sessionId, notice: CommitNotice) => {
      if (notice.kind === "create" && notice.events[0]?.seq === 1) added.push(sessionId);
      if (notice.kind === "meta" && notice.created) added.push(sessionId);
    });
    await a.create({ sessionId: "s0", owner: "o", model: "m" });
    await expect.poll(() => added, WAIT).toEqual(["s0"]);
    const feed = (
      b as unknown as { feed: { reads: PgReads; heard(text: string): void; listenAgain(): void } }
    ).feed;
    let heard = 0;
    const hear = feed.heard.bind(feed);
    feed.heard = (text) => {
      heard++;
      hear(text);
    };
    const reads = feed.reads;
    const writtenSince = reads.projectionsWrittenSince.bind(reads);
    let once = false;
    reads.projectionsWrittenSince = async (since, after, limit) => {
      if (!once) {
        once = true;
        // the create commits, and its NOTIFY is heard, before the re-read reads the rows
        const before = heard;
        await a.create({ sessionId: "y", owner: "o", model: "m" });
        await expect.poll(() => heard, WAIT).toBeGreaterThan(before);
      }
      return writtenSince(since, after, limit);
    };
    feed.listenAgain();
    await expect.poll(() => added.includes("y"), WAIT).toBe(true);
    expect(once).toBe(true);
    // every NOTIFY heard before a later create was handled, the one of y's create too
    await notifiesHandled({ a, b });
    expect(added.filter((id) => id === "y")).toEqual(["y"]);
  });
});
