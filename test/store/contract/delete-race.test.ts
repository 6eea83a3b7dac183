import { expect, it } from "vitest";
import { delta } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";

const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve));

describeContract("delete racing late appends", (backend) => {
  const open = storeFixture(backend);
  it("never resurrects a deleted session in 200 randomized races", async () => {
    const { store, openAnother } = await open();
    // where the backend allows it, one appender writes through a second instance, as another host would
    const other = backend.sharedWriters ? await openAnother() : store;
    let lateAppends = 0;
    for (let wave = 0; wave < 10; wave++) {
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const sessionId = `race-${wave}-${i}`;
          await store.create({ sessionId, owner: "o", model: "m" });
          let deleted = false;
          const appender = async (w: number) => {
            const writer = w === 2 ? other : store;
            for (let k = 0; k < 8; k++) {
              const outcome = await writer.append(sessionId, [delta("t", `${w}:${k}`)]);
              if (deleted) {
                lateAppends++;
                expect(outcome.status).toBe("retired");
              }
              if (Math.random() < 0.3) await nextTick();
            }
          };
          const deleter = async () => {
            for (let t = Math.floor(Math.random() * 6); t > 0; t--) await nextTick();
            const outcome = await store.delete(sessionId);
            deleted = true;
            expect(outcome.status).toBe("deleted");
            // a re-create with the same id is refused too
            expect((await store.create({ sessionId, owner: "o", model: "m" })).status).toBe("retired");
          };
          await Promise.all([appender(0), appender(1), appender(2), deleter()]);
          expect(await store.isRetired(sessionId)).toBe(true);
          expect((await store.readAfter(sessionId, 0, 10)).status).toBe("retired");
          expect(await other.header(sessionId)).toEqual({ status: "retired" });
        }),
      );
    }
    expect((await store.list({ limit: 500 })).rows).toEqual([]);
    expect(await other.search("0", 10)).toEqual([]);
    // the races really raced: appends arrived after deletes
    expect(lateAppends).toBeGreaterThan(0);
  });
});
