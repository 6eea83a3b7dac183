import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { delta, openTempStore } from "./open-store.js";

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("delete racing late appends", () => {
  it("never resurrects a deleted session in 200 randomized races", async () => {
    current = openTempStore();
    const { store, path } = current;
    const raw = new Database(path, { readonly: true });
    let lateAppends = 0;
    try {
      for (let wave = 0; wave < 10; wave++) {
        await Promise.all(
          Array.from({ length: 20 }, async (_, i) => {
            const sessionId = `race-${wave}-${i}`;
            await store.create({ sessionId, owner: "o", model: "m" });
            let deleted = false;
            const appender = async (w: number) => {
              for (let k = 0; k < 8; k++) {
                const outcome = await store.append(sessionId, [delta("t", `${w}:${k}`)]);
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
            const rows = raw
              .prepare("SELECT count(*) FROM events WHERE session_id = ?")
              .pluck()
              .get(sessionId);
            expect(rows).toBe(0);
          }),
        );
      }
      const projections = raw.prepare("SELECT count(*) FROM projections").pluck().get();
      const tombstones = raw.prepare("SELECT count(*) FROM tombstones").pluck().get();
      expect(projections).toBe(0);
      expect(tombstones).toBe(200);
      // the races really raced: appends arrived after deletes
      expect(lateAppends).toBeGreaterThan(0);
    } finally {
      raw.close();
    }
  });
});
