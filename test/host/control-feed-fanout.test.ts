import { describe, expect, test } from "vitest";
import type { ControlDelta } from "../../src/host/live/live-state.js";
import { ADMIN, type Principal } from "../../src/host/principal.js";
import { controlFeedFixture } from "./control-feed-fixture.js";

const { openFeed } = controlFeedFixture();

/** A principal whose name and rank count every read of them. */
function watched(name: string, reads: { count: number }): Principal {
  return {
    get name() {
      reads.count++;
      return name;
    },
    get admin() {
      reads.count++;
      return false;
    },
  } as Principal;
}

describe("control feed: who a change is looked at for", () => {
  test("a change of one owner's session reaches its owner's and the admins' listeners without a look at any other principal's", async () => {
    const { feed, store } = openFeed();
    // one principal's many open streams (a socket holds 256, a principal 64 sockets)
    const reads = { count: 0 };
    const others: ControlDelta[] = [];
    const offs = Array.from({ length: 1_000 }, (_, n) =>
      feed.subscribe(watched(n % 2 === 0 ? "eve" : `p${n}`, reads), (d) => others.push(d)),
    );
    const alices: ControlDelta[] = [];
    const admins: ControlDelta[] = [];
    feed.subscribe({ name: "alice", admin: false }, (d) => alices.push(d));
    feed.subscribe(ADMIN, (d) => admins.push(d));
    reads.count = 0;
    for (let n = 0; n < 10; n++) await store.create({ sessionId: `a${n}`, owner: "alice", model: "m" });
    expect(alices).toHaveLength(10);
    expect(admins).toHaveLength(10);
    expect(others).toEqual([]);
    expect(reads.count).toBe(0);
    // eve's own change reaches eve's 500 listeners and the admin's
    await store.create({ sessionId: "e", owner: "eve", model: "m" });
    expect(others).toHaveLength(500);
    expect(admins).toHaveLength(11);
    expect(alices).toHaveLength(10);
    // unsubscribed, twice over: heard no more, and the other listeners of the name still hear
    offs[0]!();
    offs[0]!();
    await store.create({ sessionId: "e2", owner: "eve", model: "m" });
    expect(others).toHaveLength(999);
    for (const off of offs) off();
    await store.create({ sessionId: "e3", owner: "eve", model: "m" });
    expect(others).toHaveLength(999);
    expect(admins).toHaveLength(13);
    feed.stop();
  });
});
