import { afterEach, describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { delta, openTempStore } from "./open-store.js";

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

describe("persistence failure", () => {
  it("rejects every append of a failing batch with persistence_failure and resumes at head+1", async () => {
    current = openTempStore();
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.create({ sessionId: "b", owner: "o", model: "m" });
    const acked = new Map<string, number>([
      ["a", 1],
      ["b", 1],
    ]);
    const noticed: number[] = [];
    store.subscribe("a", (notice) => {
      if (notice.kind === "append") noticed.push(...notice.events.map((event) => event.seq));
    });
    // the file may not grow any more: a full disk
    store.limitSize(0);
    const big = "x".repeat(3_000);
    let failures = 0;
    for (let round = 0; round < 200 && failures === 0; round++) {
      const outcomes = await Promise.allSettled(
        ["a", "b", "a", "b"].map((id) => store.append(id, [delta("t", `${round}${big}`)])),
      );
      const ids = ["a", "b", "a", "b"];
      for (const [i, outcome] of outcomes.entries()) {
        if (outcome.status === "fulfilled") {
          if (outcome.value.status !== "appended") throw new Error(outcome.value.status);
          acked.set(ids[i]!, outcome.value.events[0]!.seq);
        } else {
          failures++;
          expect(outcome.reason).toBeInstanceOf(SessionmuxError);
          expect((outcome.reason as SessionmuxError).code).toBe("persistence_failure");
        }
      }
      if (failures > 0) expect(failures).toBe(4);
    }
    expect(failures).toBe(4);

    store.limitSize(null);
    for (const id of ["a", "b"]) {
      const outcome = await store.append(id, [delta("t", "space is back")]);
      expect(outcome.status === "appended" && outcome.events[0]!.seq).toBe(acked.get(id)! + 1);
      const read = await store.readAfter(id, 0, 1_000);
      if (read.status !== "ok") throw new Error(read.status);
      expect(read.events.map((event) => event.seq)).toEqual(
        Array.from({ length: acked.get(id)! + 1 }, (_, i) => i + 1),
      );
    }
    // no notice was delivered for an event that never committed
    expect(noticed).toEqual(Array.from({ length: acked.get("a")! }, (_, i) => i + 2));
    expect(store.integrityCheck()).toBe("ok");
  });
});
