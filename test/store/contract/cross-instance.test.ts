import { describe, expect, it, vi } from "vitest";
import type { CommitNotice, SessionProjection } from "../../../src/store/session-store.js";
import { readWholeLog } from "../../support/whole-log.js";
import { delta, turnEnd, turnStart } from "../open-store.js";
import { backends, storeFixture } from "./backends.js";

/** What one subscriber saw of one session: notices in order, appended seqs per epoch. */
function recorder() {
  const notices: CommitNotice[] = [];
  const seqs: number[] = [];
  return {
    notices,
    seqs,
    listener(notice: CommitNotice) {
      notices.push(notice);
      if (notice.kind === "append" || notice.kind === "create") seqs.push(...notice.events.map((e) => e.seq));
      if (notice.kind === "clear") seqs.push(0);
    },
  };
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

// A backend without shared writers must refuse a second writing instance outright, rather than let
// two writers keep heads in memory and collide: that is what makes its notices complete.
for (const backend of backends.filter((b) => !b.sharedWriters)) {
  describe(`one writing instance per database [${backend.name}]`, () => {
    const open = storeFixture(backend);

    it("refuses a second writer while the first holds the database, naming the file", async () => {
      const { store, openAnother } = await open();
      await store.create({ sessionId: "s", owner: "o", model: "m" });
      await expect(openAnother()).rejects.toThrow(/sessions\.db is already open in this process/);
      const read = await store.readAfter("s", 0, 10);
      expect(read.status === "ok" && read.headSeq).toBe(1);
    });
  });
}

for (const backend of backends.filter((b) => b.sharedWriters)) {
  describe(`commit notices across instances [${backend.name}]`, () => {
    const open = storeFixture(backend);

    it("a subscriber on B sees A's create, appends, clear and delete exactly once, in order", async () => {
      const { store: a, openAnother } = await open();
      const b = await openAnother();
      const seen = recorder();
      const global: [string, CommitNotice["kind"], SessionProjection | null][] = [];
      b.subscribe("s", seen.listener);
      b.subscribeAll((sessionId, notice, projection) => global.push([sessionId, notice.kind, projection]));

      const created = await a.create({ sessionId: "s", owner: "o", model: "m" });
      if (created.status !== "created") throw new Error(created.status);
      for (let i = 0; i < 60; i++) await a.append("s", [delta("t", `x${i}`), delta("t", `y${i}`)]);
      // many writes in flight at once: several batches, each with at most one NOTIFY
      await Promise.all(range(1, 40).map((i) => a.append("s", [delta("t", `z${i}`)])));
      await vi.waitFor(() => expect(seen.seqs.at(-1)).toBe(161), { timeout: 20_000 });
      expect(seen.seqs).toEqual(range(1, 161));
      expect(seen.notices[0]?.kind).toBe("create");

      const cleared = await a.clear("s");
      if (cleared.status !== "cleared") throw new Error(cleared.status);
      await a.append("s", [turnStart("t1"), turnEnd("t1")]);
      await vi.waitFor(() => expect(seen.seqs.at(-1)).toBe(2), { timeout: 20_000 });
      await a.delete("s");
      await vi.waitFor(() => expect(seen.notices.at(-1)?.kind).toBe("delete"), { timeout: 20_000 });

      expect(seen.seqs).toEqual([...range(1, 161), 0, 1, 2]);
      const clear = seen.notices.find((notice) => notice.kind === "clear");
      expect(clear).toEqual({ kind: "clear", epoch: cleared.epoch });
      expect(seen.notices.filter((notice) => notice.kind === "delete")).toHaveLength(1);
      // store-wide listeners on B get the projection row read after the commit
      const lastAppend = global.filter(([, kind]) => kind === "append").at(-1);
      expect(lastAppend?.[2]).toMatchObject({ sessionId: "s", epoch: cleared.epoch, lastState: "completed" });
      expect(global.at(-1)).toEqual(["s", "delete", null]);
    });

    it("two instances appending to one session keep seq contiguous; each subscriber sees every seq once", async () => {
      const { store: a, openAnother } = await open();
      const b = await openAnother();
      await a.create({ sessionId: "s", owner: "o", model: "m" });
      const onA = recorder();
      const onB = recorder();
      a.subscribe("s", onA.listener);
      b.subscribe("s", onB.listener);
      const writer = (store: typeof a, name: string) =>
        Promise.all(
          range(1, 8).map(async (w) => {
            for (let i = 0; i < 15; i++) {
              const outcome = await store.append("s", [delta("t", `${name}${w}:${i}`)]);
              expect(outcome.status).toBe("appended");
            }
          }),
        );
      await Promise.all([writer(a, "a"), writer(b, "b")]);
      const read = await readWholeLog(b, "s");
      if (read.status !== "ok") throw new Error(read.status);
      const head = 1 + 2 * 8 * 15;
      expect(read.events.map((event) => event.seq)).toEqual(range(1, head));
      await vi.waitFor(() => expect(onA.seqs.at(-1)).toBe(head), { timeout: 20_000 });
      await vi.waitFor(() => expect(onB.seqs.at(-1)).toBe(head), { timeout: 20_000 });
      // From its first notice on, each subscriber sees every seq once, ascending, with no gap. Where
      // that first notice starts is not pinned: on PostgreSQL a subscriber's first notice may be
      // this instance's own commit, delivered before the other's NOTIFY for the seqs just before it
      // was read (a follow stream reads the log from its cursor, and so misses none of those).
      for (const seen of [onA.seqs, onB.seqs]) {
        expect(seen[0]).toBeLessThanOrEqual(head);
        expect(seen).toEqual(range(seen[0]!, head));
      }
    });

    it("carries a commit of large events to B in notices of at most the item budget, none missing", async () => {
      const { store: a, openAnother } = await open();
      const b = await openAnother();
      const seen = recorder();
      b.subscribe("large", seen.listener);
      await a.create({ sessionId: "large", owner: "o", model: "m" });
      // 7.2 MiB in one commit: B reads it by seq after the NOTIFY, 1 MiB of data at a time
      const kib = [600, 600, 1, 900, 600, 600, 600, 1000, 2, 600, 600, 600, 300];
      const outcome = await a.append(
        "large",
        kib.map((k, i) => delta("t", `${i}:${"L".repeat(k * 1024)}`)),
      );
      expect(outcome.status).toBe("appended");
      // the create wrote seq 1
      await vi.waitFor(() => expect(seen.seqs.at(-1)).toBe(kib.length + 1), { timeout: 20_000 });
      expect(seen.seqs).toEqual(range(1, kib.length + 1));
      const appends = seen.notices.filter((n) => n.kind === "append");
      const dataBytes = (notice: CommitNotice) =>
        notice.kind === "append"
          ? notice.events.reduce((sum, e) => sum + JSON.stringify(e.data).length, 0)
          : 0;
      // each notice B made is one read: within the budget plus the one event that crossed it
      for (const notice of appends) expect(dataBytes(notice)).toBeLessThan(2 * 1024 * 1024);
      expect(appends.length).toBeGreaterThanOrEqual(6);
    });

    it("delivers nothing for sessions nobody on B follows, and stops after unsubscribe", async () => {
      const { store: a, openAnother } = await open();
      const b = await openAnother();
      // Subscribed before the creates: a notice of a commit made before the subscription may still
      // arrive after it (followers drop it by seq), so only this order has one right answer.
      const seen = recorder();
      const unsubscribe = b.subscribe("followed", seen.listener);
      await a.create({ sessionId: "followed", owner: "o", model: "m" });
      await a.create({ sessionId: "other", owner: "o", model: "m" });
      await a.append("other", [delta("t", "x")]);
      await a.append("followed", [delta("t", "y")]);
      await vi.waitFor(() => expect(seen.seqs).toEqual([1, 2]), { timeout: 20_000 });
      unsubscribe();
      await a.append("followed", [delta("t", "z")]);
      // a later subscriber on the same session proves the NOTIFY was handled meanwhile
      const later = recorder();
      b.subscribe("followed", later.listener);
      await a.append("followed", [delta("t", "w")]);
      await vi.waitFor(() => expect(later.seqs.at(-1)).toBe(4), { timeout: 20_000 });
      expect(seen.seqs).toEqual([1, 2]);
    });
  });
}
