import { describe, expect, test } from "vitest";
import { ControlFeed } from "../../src/host/control-feed.js";
import { LiveRegistry } from "../../src/host/live/live-registry.js";
import type { ControlDelta } from "../../src/host/live/live-state.js";
import { ADMIN } from "../../src/host/principal.js";
import { takeListenerWarnings } from "../support/listener-errors.setup.js";
import { controlFeedFixture, noJobs } from "./control-feed-fixture.js";

const { openFeed, openStore } = controlFeedFixture();

/** Counts the listeners a component holds on `target`'s `method` (a subscribe returning its off). */
function countedListeners<T extends object>(
  target: T,
  method: keyof T & string,
): { view: T; held: () => number } {
  let held = 0;
  const view = new Proxy(target, {
    get(object, key, receiver) {
      const value = Reflect.get(object, key, receiver);
      if (typeof value !== "function") return value;
      if (key !== method) return value.bind(object);
      return (...args: unknown[]) => {
        const off = value.apply(object, args) as () => void;
        held++;
        let once = false;
        return () => {
          if (!once) held--;
          once = true;
          off();
        };
      };
    },
  });
  return { view, held: () => held };
}

const projectionsOf = (deltas: ControlDelta[], sessionId: string) =>
  deltas.filter((d) => d.kind === "projection" && d.sessionId === sessionId);

describe("control feed: subscribers, stop, sessions that go", () => {
  test("a deleted session sends no projection delta and no listener fails (a delete carries no projection)", async () => {
    const { feed, store } = openFeed();
    const deltas: ControlDelta[] = [];
    feed.subscribe(ADMIN, (d) => deltas.push(d));
    await store.create({ sessionId: "gone", owner: "admin", model: "demo-fast" });
    expect(projectionsOf(deltas, "gone")).toHaveLength(1);
    expect(await store.delete("gone")).toEqual({ status: "deleted" });
    expect(projectionsOf(deltas, "gone")).toHaveLength(1);
    expect(await takeListenerWarnings()).toEqual([]);
  });

  test("an unsubscribed listener hears nothing more while the others still hear", async () => {
    const { feed, store } = openFeed();
    const left: ControlDelta[] = [];
    const stayed: ControlDelta[] = [];
    const leave = feed.subscribe(ADMIN, (d) => left.push(d));
    feed.subscribe(ADMIN, (d) => stayed.push(d));
    await store.create({ sessionId: "a", owner: "admin", model: "demo-fast" });
    leave();
    await store.create({ sessionId: "b", owner: "admin", model: "demo-fast" });
    expect(left.map((d) => d.kind === "projection" && d.sessionId)).toEqual(["a"]);
    expect(stayed.map((d) => d.kind === "projection" && d.sessionId)).toEqual(["a", "b"]);
  });

  test("after stop no subscriber hears a commit or a live change, and stopping again is harmless", async () => {
    const { feed, registry, store } = openFeed();
    const deltas: ControlDelta[] = [];
    feed.subscribe(ADMIN, (d) => deltas.push(d));
    await store.create({ sessionId: "a", owner: "admin", model: "demo-fast" });
    registry.attach("a", "admin");
    const heard = deltas.length;
    expect(heard).toBeGreaterThanOrEqual(2);
    feed.stop();
    await store.append("a", [{ type: "session/renamed", data: { title: "after stop" } }]);
    registry.status.set("a", "running");
    expect(deltas).toHaveLength(heard);
    expect(() => feed.stop()).not.toThrow();
  });

  test("stop leaves no listener on the store or the live registry", async () => {
    const onStore = countedListeners(openStore(), "subscribeAll");
    const onRegistry = countedListeners(new LiveRegistry(noJobs), "subscribeWithOwner");
    const feed = new ControlFeed(onStore.view, onRegistry.view, "g1");
    feed.start();
    expect([onStore.held(), onRegistry.held()]).toEqual([1, 1]);
    feed.stop();
    expect([onStore.held(), onRegistry.held()]).toEqual([0, 0]);
  });

  test("a live session whose projection is gone by the time it is read is left out of the baseline", async () => {
    const { feed, registry, store } = openFeed();
    await store.create({ sessionId: "kept", owner: "admin", model: "demo-fast" });
    registry.attach("kept", "admin");
    // live in the registry's cut, but no row to read: as if deleted between the cut and the read
    registry.attach("ghost", "admin");
    const baseline = await feed.baseline(ADMIN);
    expect(baseline.agents.map((a) => a.sessionId).sort()).toEqual(["ghost", "kept"]);
    expect(baseline.projections.map((p) => p.sessionId)).toEqual(["kept"]);
  });
});
