import { expect, it } from "vitest";
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
