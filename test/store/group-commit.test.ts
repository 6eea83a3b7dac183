import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { delta, openTempStore } from "./open-store.js";

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

describe("group commit", () => {
  it("resolves an append only after its commit is visible to another connection", async () => {
    current = openTempStore();
    const { store, path } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const reader = new Database(path, { readonly: true });
    try {
      const count = reader.prepare("SELECT count(*) FROM events WHERE session_id = 'a'").pluck();
      const pending = Array.from({ length: 50 }, (_, i) => store.append("a", [delta("t", `x${i}`)]));
      expect(count.get()).toBe(1);
      for (const promise of pending) {
        const outcome = await promise;
        if (outcome.status !== "appended") throw new Error(outcome.status);
        const seq = outcome.events[0]!.seq;
        const visible = reader
          .prepare("SELECT count(*) FROM events WHERE session_id = 'a' AND seq = ?")
          .pluck();
        expect(visible.get(seq)).toBe(1);
      }
      expect(count.get()).toBe(51);
    } finally {
      reader.close();
    }
  });
});
