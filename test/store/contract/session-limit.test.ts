import { expect, it } from "vitest";
import type { CreateInput } from "../../../src/store/session-store.js";
import { describeContract, storeFixture } from "./backends.js";

const created = (outcome: { status: string }) => outcome.status === "created";

describeContract("live sessions per owner", (backend) => {
  const open = storeFixture(backend);
  // null: no bound (as the host asks for the admin)
  const input = (sessionId: string, owner = "o", max: number | null = 2): CreateInput => ({
    sessionId,
    owner,
    model: "m",
    ...(max === null ? {} : { maxOwnerSessions: max }),
  });

  it("refuses a create or fork past the owner's bound, counts only live sessions of that owner", async () => {
    const { store } = await open();
    expect((await store.create(input("a"))).status).toBe("created");
    expect((await store.create(input("b"))).status).toBe("created");
    expect(await store.create(input("c"))).toEqual({ status: "too_many_sessions", max: 2 });
    expect(await store.fork({ sourceId: "a", targetId: "a2", owner: "o", maxOwnerSessions: 2 })).toEqual({
      status: "too_many_sessions",
      max: 2,
    });
    // nothing of a refused create was written
    expect(await store.header("c")).toEqual({ status: "not_found" });
    expect(await store.header("a2")).toEqual({ status: "not_found" });
    // another owner has a bound of its own; a create without a bound (the admin's) is not counted
    expect((await store.create(input("p1", "p"))).status).toBe("created");
    expect((await store.create(input("x", "o", null))).status).toBe("created");
    expect((await store.create(input("d", "o", 4))).status).toBe("created");
    // a deleted session no longer counts
    expect((await store.delete("a")).status).toBe("deleted");
    expect((await store.delete("b")).status).toBe("deleted");
    expect((await store.delete("x")).status).toBe("deleted");
    expect(
      (await store.fork({ sourceId: "d", targetId: "d2", owner: "o", maxOwnerSessions: 2 })).status,
    ).toBe("created");
  });

  it("lets exactly as many of concurrent creates through as the bound has room for", async () => {
    const { store } = await open();
    expect((await store.create(input("first", "o", 3))).status).toBe("created");
    // submitted in one tick: they commit in one transaction, where the rows are not written yet;
    // another owner's creates in the same transaction count for that owner only
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, (_, i) => [
        store.create(input(`s${i}`, "o", 3)),
        store.create(input(`p${i}`, "p", 4)),
      ]).flat(),
    );
    const mine = outcomes.filter((_, i) => i % 2 === 0);
    const theirs = outcomes.filter((_, i) => i % 2 === 1);
    expect(mine.filter(created)).toHaveLength(2);
    expect(mine.filter((o) => o.status === "too_many_sessions")).toHaveLength(4);
    expect(theirs.filter(created)).toHaveLength(4);
    const listed = await store.list({ owner: "o", limit: 50 });
    expect(listed.rows).toHaveLength(3);
    expect((await store.list({ owner: "p", limit: 50 })).rows).toHaveLength(4);
  });

  if (backend.sharedWriters) {
    it("holds across store instances creating for one owner at once", async () => {
      const { store, openAnother } = await open();
      const others = [store, await openAnother(), await openAnother()];
      const outcomes = await Promise.all(
        Array.from({ length: 12 }, (_, i) => others[i % 3]!.create(input(`m${i}`, "o", 5))),
      );
      expect(outcomes.filter(created)).toHaveLength(5);
      expect((await store.list({ owner: "o", limit: 50 })).rows).toHaveLength(5);
    });
  }
});
