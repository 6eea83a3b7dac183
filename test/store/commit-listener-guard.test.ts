import { afterEach, describe, expect, it } from "vitest";
import { HostMetrics } from "../../src/transport/metrics.js";
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
    current = openTempStore({ metrics, onListenerError: (err) => reported.push(err) });
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
