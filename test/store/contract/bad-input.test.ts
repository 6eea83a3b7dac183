import { expect, it } from "vitest";
import { encodeFrameShared } from "../../../protocol/codec.js";
import { Limits } from "../../../protocol/limits.js";
import { MAX_DATA_DEPTH } from "../../../src/store/storable-data.js";
import { delta, turnStart } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";

describeContract("expected refusals are result values", (backend) => {
  const open = storeFixture(backend);
  it("answers unknown sessions with not_found everywhere", async () => {
    const { store } = await open();
    expect(await store.append("nobody", [turnStart("t")])).toEqual({ status: "not_found" });
    expect(await store.delete("nobody")).toEqual({ status: "not_found" });
    expect(await store.header("nobody")).toEqual({ status: "not_found" });
    expect(await store.page("nobody", { limit: 10 })).toEqual({ status: "not_found" });
    expect(await store.readAfter("nobody", 0, 10)).toEqual({ status: "not_found" });
    expect(await store.projection("nobody")).toBeNull();
    expect(await store.isRetired("nobody")).toBe(false);
  });

  it("refuses event data with a key no client may decode, writing nothing, and stays readable", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [delta("t", "before")]);
    for (const key of ["__proto__", "constructor", "prototype"]) {
      // in the second item of an array: every item is looked at, not the first alone
      const args = JSON.parse(`{"nested":[{"fine":1},{"${key}":1}]}`) as unknown;
      const refused = store.append("a", [
        delta("t", "same batch"),
        { type: "tool/call", data: { turnId: "t", toolCallId: "c", name: "x", args } },
      ]);
      await expect(refused).rejects.toMatchObject({
        code: "bad_request",
        message: `event 1 carries the key "${key}", which no client may decode`,
        data: { field: "/events/1/data", key },
      });
    }
    const read = await store.readAfter("a", 0, 10);
    expect(read.status === "ok" && read.events.map((e) => e.type)).toEqual([
      "session/created",
      "assistant/delta",
    ]);
    const encoded = await store.readAfterEncoded("a", 0, 10, 10);
    expect(encoded.status === "ok" && encoded.count).toBe(2);
  });

  it("refuses event data nested deeper than 64 levels, checks keys down to there, and takes 64 levels and nulls", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    // the data map is level 0, `args` the first of `levels` maps under it
    const toolCall = (levels: number, inner: unknown) => {
      let args = inner;
      for (let i = 0; i < levels; i++) args = { n: args };
      return {
        type: "tool/call" as const,
        data: { turnId: "t", toolCallId: "c", name: "x", args, none: null },
      };
    };
    // an array counts as a level: this one is the 64th
    const deepest = toolCall(MAX_DATA_DEPTH - 1, [null, 1]);
    expect(MAX_DATA_DEPTH).toBe(64);
    expect(await store.append("a", [deepest])).toMatchObject({ status: "appended" });
    await expect(
      store.append("a", [delta("t", "same batch"), toolCall(MAX_DATA_DEPTH + 1, 1)]),
    ).rejects.toMatchObject({
      code: "bad_request",
      message: "event 1 nests deeper than 64 levels, which no frame may carry",
      data: { field: "/events/1/data", depth: 64 },
    });
    await expect(store.append("a", [toolCall(MAX_DATA_DEPTH - 1, [[1]])])).rejects.toMatchObject({
      code: "bad_request",
      data: { depth: 64 },
    });
    // a key no client may decode, at the deepest level
    await expect(
      store.append("a", [toolCall(MAX_DATA_DEPTH - 1, JSON.parse('{"__proto__":1}'))]),
    ).rejects.toMatchObject({
      code: "bad_request",
      data: { field: "/events/0/data", key: "__proto__" },
    });
    const read = await store.readAfter("a", 0, 10);
    expect(read.status === "ok" && read.events.map((e) => e.type)).toEqual(["session/created", "tool/call"]);
    expect(read.status === "ok" && read.events[1]!.data).toEqual(deepest.data);
  });

  it("refuses an event over the size limit, writing nothing, while a write batched beside it commits", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.create({ sessionId: "b", owner: "o", model: "m" });
    // a string's MessagePack is its bytes plus a 5-byte header, the map around it a few more
    const justUnder = "u".repeat(Limits.maxEventBytes - 64);
    const over = "o".repeat(Limits.maxEventBytes);
    const [refused, beside, fits] = await Promise.allSettled([
      store.append("a", [delta("t", "same append"), delta("t", over)]),
      store.append("b", [delta("t", "beside")]),
      store.append("b", [delta("t", justUnder)]),
    ]);
    expect(refused).toMatchObject({ status: "rejected", reason: { code: "payload_too_large" } });
    expect(beside).toMatchObject({ status: "fulfilled", value: { status: "appended" } });
    expect(fits).toMatchObject({ status: "fulfilled", value: { status: "appended" } });
    const a = await store.readAfter("a", 0, 10);
    expect(a.status === "ok" && a.events.map((e) => e.type)).toEqual(["session/created"]);
    expect(a.status === "ok" && a.headSeq).toBe(1);
    const b = await store.readAfter("b", 0, 10);
    expect(b.status === "ok" && b.events.map((e) => e.seq)).toEqual([1, 2, 3]);
  });

  it("takes an event whose data is exactly the size limit, and refuses one a byte over, naming its size", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    // the bytes around the text: a delta with a 70,000-byte text (a 5-byte string header, as any over 64 KiB)
    const around = encodeFrameShared(delta("t", "x".repeat(70_000)).data).length - 70_000;
    const exact = delta("t", "e".repeat(Limits.maxEventBytes - around));
    expect(encodeFrameShared(exact.data).length).toBe(Limits.maxEventBytes);
    expect(await store.append("a", [exact])).toMatchObject({ status: "appended" });
    const over = delta("t", "o".repeat(Limits.maxEventBytes - around + 1));
    await expect(store.append("a", [over])).rejects.toMatchObject({
      code: "payload_too_large",
      data: { type: "assistant/delta", bytes: Limits.maxEventBytes + 1, limit: Limits.maxEventBytes },
    });
    const read = await store.readAfter("a", 0, 10);
    expect(read.status === "ok" && read.headSeq).toBe(2);
  });

  it("answers retired sessions with retired everywhere, and a second create with exists", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    expect(await store.create({ sessionId: "a", owner: "p", model: "m" })).toEqual({ status: "exists" });
    expect(await store.delete("a")).toEqual({ status: "deleted" });
    expect(await store.delete("a")).toEqual({ status: "retired" });
    expect(await store.append("a", [delta("t", "late")])).toEqual({ status: "retired" });
    expect(await store.create({ sessionId: "a", owner: "o", model: "m" })).toEqual({ status: "retired" });
    expect(await store.header("a")).toEqual({ status: "retired" });
    expect(await store.page("a", { limit: 10 })).toEqual({ status: "retired" });
    expect(await store.readAfter("a", 0, 10)).toEqual({ status: "retired" });
  });

  it("survives reopening: tombstones and logs are durable", async () => {
    const { store, openAnother } = await open();
    await store.create({ sessionId: "kept", owner: "o", model: "m" });
    await store.append("kept", [delta("t", "x")]);
    await store.create({ sessionId: "gone", owner: "o", model: "m" });
    await store.delete("gone");
    await store.close();
    const reopened = await openAnother();
    {
      expect(await reopened.create({ sessionId: "gone", owner: "o", model: "m" })).toEqual({
        status: "retired",
      });
      // and stays so once the tombstone was read (a writer keeps what it read)
      expect(await reopened.append("gone", [delta("t", "late")])).toEqual({ status: "retired" });
      expect(await reopened.delete("gone")).toEqual({ status: "retired" });
      const outcome = await reopened.append("kept", [delta("t", "y")]);
      expect(outcome.status === "appended" && outcome.events[0]!.seq).toBe(3);
    }
  });

  it("refuses writes after close with host_shutting_down", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const pending = store.append("a", [delta("t", "queued before close")]);
    await store.close();
    expect((await pending).status).toBe("appended");
    await expect(store.append("a", [delta("t", "late")])).rejects.toMatchObject({
      code: "host_shutting_down",
    });
  });
});
