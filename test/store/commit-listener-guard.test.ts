import { afterEach, describe, expect, it } from "vitest";
import type { CommitNotice } from "../../src/store/session-store.js";
import { HostMetrics } from "../../src/transport/metrics.js";
import { takeListenerWarnings } from "../support/listener-errors.setup.js";
import { delta, openTempStore } from "./open-store.js";

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

describe("commit listener guard", () => {
  it("keeps delivering past a throwing listener, and reports the failure to the handler and the metric", async () => {
    const reported: unknown[] = [];
    const metrics = new HostMetrics();
    current = openTempStore({
      metrics,
      logger: { error: (obj) => reported.push((obj as { err: unknown }).err) },
    });
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const after: number[] = [];
    const global: number[] = [];
    store.subscribe("a", () => {
      throw new Error("faulty listener");
    });
    store.subscribe("a", (notice) => {
      if (notice.kind === "append") after.push(...notice.events.map((event) => event.seq));
    });
    store.subscribeAll((_sessionId, notice) => {
      if (notice.kind === "append") global.push(...notice.events.map((event) => event.seq));
    });
    const outcome = await store.append("a", [delta("t", "x")]);
    expect(outcome.status).toBe("appended");
    expect(after).toEqual([2]);
    expect(global).toEqual([2]);
    expect(reported.map((err) => (err as Error).message)).toEqual(["faulty listener"]);
    expect((await metrics.listenerFailures.get()).values[0]?.value).toBe(1);
  });
});

describe("commit listener guard without a failure metric", () => {
  it("keeps delivering past a throwing listener when the metrics count only commits", async () => {
    const reported: string[] = [];
    current = openTempStore({
      metrics: { committed: () => undefined },
      logger: { error: (obj) => reported.push((obj as { err: Error }).err.message) },
    });
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const after: number[] = [];
    store.subscribe("a", () => {
      throw new Error("faulty listener");
    });
    store.subscribe("a", (notice) => {
      if (notice.kind === "append") after.push(...notice.events.map((event) => event.seq));
    });
    expect((await store.append("a", [delta("t", "x")])).status).toBe("appended");
    expect(after).toEqual([2]);
    expect(reported).toEqual(["faulty listener"]);
  });
});

describe("commit listener subscriptions", () => {
  it("an unsubscribed listener gets nothing more; the others on that session and store-wide go on", async () => {
    current = openTempStore();
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const kept: number[] = [];
    const dropped: number[] = [];
    const globalDropped: number[] = [];
    const seqs = (into: number[]) => (notice: CommitNotice) => {
      if (notice.kind === "append") into.push(...notice.events.map((event) => event.seq));
    };
    store.subscribe("a", seqs(kept));
    const off = store.subscribe("a", seqs(dropped));
    const offGlobal = store.subscribeAll((_id, notice) => seqs(globalDropped)(notice));
    await store.append("a", [delta("t", "1")]);
    off();
    offGlobal();
    // a second unsubscribe is harmless, even once the session has no listener set left
    const lone = store.subscribe("b", () => {});
    lone();
    expect(() => lone()).not.toThrow();
    await store.append("a", [delta("t", "2")]);
    expect(kept).toEqual([2, 3]);
    expect(dropped).toEqual([2]);
    expect(globalDropped).toEqual([2]);
    // the last listener of a session leaves, and a new one can subscribe again
    const again: number[] = [];
    store.subscribe("a", seqs(again));
    await store.append("a", [delta("t", "3")]);
    expect(again).toEqual([4]);
  });

  it("without a handler a throwing listener raises a process warning with the listener code", async () => {
    current = openTempStore();
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    store.subscribe("a", () => {
      throw new Error("faulty listener");
    });
    await store.append("a", [delta("t", "x")]);
    expect(await takeListenerWarnings()).toEqual(["a commit listener threw: faulty listener"]);
  });
});
