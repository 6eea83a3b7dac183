import { afterEach, describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { delta, openTempStore, turnEnd, turnStart } from "./open-store.js";

/**
 * A read-only instance beside the host that writes the file (tools, a second process) learns of
 * the host's commits from the file alone; what it read before one must not answer after it.
 */
let env: ReturnType<typeof openTempStore> | undefined;
let reader: SqliteSessionStore | undefined;
afterEach(async () => {
  await reader?.close();
  await env?.dispose();
  reader = undefined;
  env = undefined;
});

describe("a read-only instance beside the writer", () => {
  it("sees each commit of the writer in its header, pages and reads", async () => {
    env = openTempStore();
    const { store } = env;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("t1"), delta("t1", "one")]);
    reader = SqliteSessionStore.open(env.path, { readOnly: true });
    expect(await reader.header("a")).toMatchObject({ status: "ok", headSeq: 3 });
    expect(await reader.readAfterEncoded("a", 0, 100, 10)).toMatchObject({ count: 3, headSeq: 3 });

    await store.append("a", [delta("t1", "two"), turnEnd("t1")]);
    expect(await reader.header("a")).toMatchObject({ status: "ok", headSeq: 5 });
    expect(await reader.readAfterEncoded("a", 0, 100, 10)).toMatchObject({
      count: 5,
      lastSeq: 5,
      headSeq: 5,
    });
    const tail = await reader.page("a", { limit: 1 });
    expect(tail.status === "ok" && [tail.events.map((e) => e.seq), tail.headSeq]).toEqual([[5], 5]);
    expect((await reader.projection("a"))?.seq).toBe(5);

    const cleared = await store.clear("a");
    if (cleared.status !== "cleared") throw new Error(cleared.status);
    expect(await reader.header("a")).toMatchObject({ status: "ok", headSeq: 0 });
    expect(await reader.readAfterEncoded("a", 1, 10, 5)).toEqual({
      status: "ok",
      epoch: cleared.epoch,
      headSeq: 0,
      count: 0,
      lastSeq: 1,
      arrays: [],
    });
    expect(await reader.readAfter("a", 0, 10)).toMatchObject({
      epoch: cleared.epoch,
      headSeq: 0,
      events: [],
    });

    await store.delete("a");
    expect(await reader.header("a")).toEqual({ status: "retired" });
    expect(await reader.readAfterEncoded("a", 0, 100, 10)).toEqual({ status: "retired" });
  });
});
