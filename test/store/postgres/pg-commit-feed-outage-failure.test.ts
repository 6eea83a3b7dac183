import { describe, expect, it } from "vitest";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { turnEnd, turnStart, userMessage } from "../open-store.js";
import { holdNotices } from "./held-notices.js";
import { notifiesHandled, twoHostsFixture } from "./two-hosts.js";

/**
 * A turn that failed on another host while this host heard none of its NOTIFYs, in a session
 * followed here of which nothing was delivered yet, followed by a later commit: the re-read after
 * listening again tells the failed `turn/end` to store-wide listeners (the list notifier's
 * `agent.error`), though it is not the session's newest event; of a session created meanwhile,
 * after telling it created (the list notifier's `session.added` before its `agent.error`).
 */
const openHosts = twoHostsFixture("feed_outage_failure");
const WAIT = { timeout: 20_000 };

describe.skipIf(!pgUrl)("PostgreSQL commit feed: a failure hidden by an outage", () => {
  it("tells a followed session's failed turn that a later commit followed, from the failure on", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    await a.append("s", [turnStart("t1"), turnEnd("t1", "completed")]);
    await notifiesHandled({ a, b });
    // B follows the session, having delivered nothing of it
    const told: string[] = [];
    b.subscribeAll((sessionId, notice: CommitNotice) => {
      if (sessionId !== "s" || (notice.kind !== "append" && notice.kind !== "create")) return;
      for (const event of notice.events)
        told.push(
          event.type === "turn/end"
            ? `${event.seq} turn/end ${event.data.state}`
            : `${event.seq} ${event.type}`,
        );
    });
    const followed: number[] = [];
    b.subscribe("s", (notice) => {
      if (notice.kind === "append" || notice.kind === "create")
        followed.push(...notice.events.map((e) => e.seq));
    });
    // the outage: B hears none of the NOTIFYs of the failed turn and the message after it
    const notices = holdNotices(b);
    await a.append("s", [turnStart("t2"), turnEnd("t2", "failed")]);
    await a.append("s", [userMessage("after the failure")]);
    const feed = (b as unknown as { feed: { listenAgain(): void } }).feed;
    feed.listenAgain();
    await expect.poll(() => followed.at(-1), WAIT).toBe(6);
    expect(told).toEqual(["5 turn/end failed", "6 user/message"]);
    notices.held.splice(0);
    notices.release();
  });
  it("tells a session created meanwhile and followed here as created before its failure", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s0", owner: "o", model: "m" });
    await notifiesHandled({ a, b });
    const told: string[] = [];
    b.subscribeAll((sessionId, notice: CommitNotice) => {
      if (sessionId !== "y") return;
      if (notice.kind === "meta" && notice.created) told.push("created");
      if (notice.kind === "create" && notice.remote && notice.events[0]?.seq === 1) told.push("created");
      if (notice.kind === "append" && notice.remote)
        for (const event of notice.events)
          told.push(
            event.type === "turn/end"
              ? `${event.seq} turn/end ${event.data.state}`
              : `${event.seq} ${event.type}`,
          );
    });
    // the outage: B hears none of the NOTIFYs of the create and its failed turn, and a follower
    // there subscribes to the new session meanwhile
    const notices = holdNotices(b);
    await a.create({ sessionId: "y", owner: "o", model: "m" });
    const followed: number[] = [];
    b.subscribe("y", (notice) => {
      if (notice.kind === "append" || notice.kind === "create")
        followed.push(...notice.events.map((e) => e.seq));
    });
    await a.append("y", [turnStart("t1"), turnEnd("t1", "failed")]);
    const feed = (b as unknown as { feed: { listenAgain(): void } }).feed;
    feed.listenAgain();
    await expect.poll(() => followed.at(-1), WAIT).toBe(3);
    await expect.poll(() => told, WAIT).toEqual(["created", "3 turn/end failed"]);
    notices.held.splice(0);
    notices.release();
  });
});
