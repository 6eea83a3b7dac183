import { afterEach, describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { delta, openTempStore } from "./open-store.js";

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(() => {
  current?.dir.remove();
  current = undefined;
});

describe("group commit: counting and closing", () => {
  it("counts every committed operation and transaction", async () => {
    current = openTempStore();
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const before = store.stats();
    await Promise.all(Array.from({ length: 7 }, (_, i) => store.append("a", [delta("t", `${i}`)])));
    await store.append("a", [delta("t", "alone")]);
    const after = store.stats();
    expect(after.operations - before.operations).toBe(8);
    // the 7 of one tick share a transaction; the eighth has its own
    expect(after.transactions - before.transactions).toBe(2);
    expect(after.rollbacks).toBe(before.rollbacks);
    await store.close();
  });

  it("close settles every write already queued before it resolves, then refuses new ones", async () => {
    current = openTempStore();
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const settled: number[] = [];
    const queued = Array.from({ length: 5 }, (_, i) =>
      store.append("a", [delta("t", `${i}`)]).then((outcome) => {
        settled.push(i);
        return outcome;
      }),
    );
    await store.close();
    expect(settled).toHaveLength(5);
    for (const outcome of await Promise.all(queued)) expect(outcome.status).toBe("appended");
    const late = await store.append("a", [delta("t", "late")]).catch((err: unknown) => err);
    expect(late).toBeInstanceOf(SessionmuxError);
    expect((late as SessionmuxError).code).toBe("host_shutting_down");
  });

  it("close with nothing queued resolves at once", async () => {
    current = openTempStore();
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.close();
    await expect(store.create({ sessionId: "b", owner: "o", model: "m" })).rejects.toMatchObject({
      code: "host_shutting_down",
    });
  });
});
