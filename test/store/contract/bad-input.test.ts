import { expect, it } from "vitest";
import { Limits } from "../../../protocol/limits.js";
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
      const args = JSON.parse(`{"nested":[{"${key}":1}]}`) as unknown;
      const refused = store.append("a", [
        delta("t", "same batch"),
        { type: "tool/call", data: { turnId: "t", toolCallId: "c", name: "x", args } },
      ]);
      await expect(refused).rejects.toMatchObject({ code: "bad_request" });
    }
    const read = await store.readAfter("a", 0, 10);
    expect(read.status === "ok" && read.events.map((e) => e.type)).toEqual([
      "session/created",
      "assistant/delta",
    ]);
    const encoded = await store.readAfterEncoded("a", 0, 10, 10);
    expect(encoded.status === "ok" && encoded.count).toBe(2);
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
