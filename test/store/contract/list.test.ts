import { expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { turnStart, userMessage } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";

describeContract("list", (backend) => {
  const open = storeFixture(backend);
  it("orders by updatedAt desc then session id, and pages with a cursor without gaps or repeats", async () => {
    let clock = 1_000;
    const { store } = await open({ now: () => clock });
    const expected: { id: string; updatedAt: number }[] = [];
    for (let i = 0; i < 37; i++) {
      // several sessions share an updatedAt so ties must be broken by id
      clock = 1_000 + Math.floor(i / 3) * 10;
      const id = `s${String(36 - i).padStart(2, "0")}`;
      await store.create({ sessionId: id, owner: i % 2 ? "alice" : "bob", model: "m" });
      expected.push({ id, updatedAt: clock });
    }
    clock = 50_000;
    await store.append("s30", [turnStart("t"), userMessage("bump")]);
    expected.find((row) => row.id === "s30")!.updatedAt = 50_000;
    expected.sort((x, y) => y.updatedAt - x.updatedAt || (x.id < y.id ? -1 : 1));

    const seen: string[] = [];
    let before: string | undefined;
    for (let pageNo = 0; pageNo < 10; pageNo++) {
      const page = await store.list({ limit: 5, ...(before ? { before } : {}) });
      // a page holds the limit, the last one what is left
      expect(page.rows).toHaveLength(Math.min(5, expected.length - seen.length));
      seen.push(...page.rows.map((row) => row.sessionId));
      if (!page.next) break;
      before = page.next;
    }
    expect(seen).toEqual(expected.map((row) => row.id));
    expect(seen[0]).toBe("s30");
  });

  it("stores what moves a row: a prompt alone moves it up, a clear that keeps its place changes its epoch", async () => {
    let clock = 1_000;
    const { store, openReader } = await open({ now: () => clock });
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    clock = 2_000;
    await store.create({ sessionId: "b", owner: "o", model: "m" });
    // a user message with no turn yet: the list order moves, the state stays idle
    clock = 3_000;
    await store.append("a", [userMessage("waiting for a turn")]);
    // b was never prompted: its clear leaves its order and state as they were
    const cleared = await store.clear("b");
    if (cleared.status !== "cleared") throw new Error(cleared.status);
    const reader = await openReader();
    for (const view of [store, reader]) {
      const { rows } = await view.list({ limit: 10 });
      expect(rows.map((row) => [row.sessionId, row.updatedAt, row.lastState, row.epoch])).toEqual([
        ["a", 3_000, "idle", rows[0]!.epoch],
        ["b", 2_000, "idle", cleared.epoch],
      ]);
    }
  });

  it("filters by owner and by parked", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "alice", model: "m" });
    await store.create({ sessionId: "b", owner: "bob", model: "m" });
    await store.append("b", [
      turnStart("t"),
      {
        type: "interaction/requested",
        data: { turnId: "t", interactionId: "i", kind: "approval", action: "rm" },
      },
    ]);
    expect((await store.list({ limit: 10, owner: "alice" })).rows.map((row) => row.sessionId)).toEqual(["a"]);
    expect((await store.list({ limit: 10, parked: true })).rows.map((row) => row.sessionId)).toEqual(["b"]);
    expect((await store.list({ limit: 10, parked: true, owner: "alice" })).rows).toEqual([]);
    const all = await store.list({ limit: 2 });
    expect(all.rows.length).toBe(2);
    expect(all.next).toBeUndefined();
  });

  it("refuses a cursor it did not issue with bad_request", async () => {
    const { store } = await open();
    const error = await store.list({ limit: 5, before: "garbage!" }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(SessionmuxError);
    expect((error as SessionmuxError).code).toBe("bad_request");
  });
});
