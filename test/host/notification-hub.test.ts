import { describe, expect, test, vi } from "vitest";
import type { Notification } from "../../protocol/index.js";
import { NotificationHub } from "../../src/host/notifications.js";
import { ADMIN, type Principal } from "../../src/host/principal.js";

const alice: Principal = { name: "alice", admin: false };
const bob: Principal = { name: "bob", admin: false };
const removed = (sessionId: string): Notification => ({ name: "session.removed", value: { sessionId } });
const failed = (sessionId: string, message: string): Notification => ({
  name: "agent.error",
  value: { sessionId, message },
});

describe("NotificationHub delivery (protocol-v1 §6)", () => {
  test("one tick reaches each subscriber once, after the synchronous run that published it", async () => {
    const hub = new NotificationHub();
    const lists: (readonly Notification[])[] = [];
    hub.subscribeLists(alice, (list) => lists.push(list));
    hub.publish("alice", removed("a1"));
    hub.publish("alice", removed("a2"));
    expect(lists).toEqual([]);
    await vi.waitFor(() => expect(lists).toHaveLength(1));
    expect(lists[0]).toEqual([removed("a1"), removed("a2")]);
    hub.publish("alice", removed("a3"));
    await vi.waitFor(() => expect(lists).toHaveLength(2));
    expect(lists[1]).toEqual([removed("a3")]);
  });

  test("subscribers who see the same notifications share one frozen list; others get only theirs or none", async () => {
    const hub = new NotificationHub();
    const got = new Map<string, (readonly Notification[])[]>();
    const listen = (key: string, p: Principal) => {
      got.set(key, []);
      hub.subscribeLists(p, (list) => got.get(key)!.push(list));
    };
    listen("alice 1", alice);
    listen("alice 2", alice);
    listen("bob", bob);
    listen("admin 1", ADMIN);
    listen("admin 2", { name: "root", admin: true });
    hub.publish("alice", removed("a"));
    hub.publish("carol", removed("c"));
    await vi.waitFor(() => expect(got.get("alice 1")).toHaveLength(1));

    const [alice1] = got.get("alice 1")!;
    const [alice2] = got.get("alice 2")!;
    expect(alice1).toEqual([removed("a")]);
    expect(alice2).toBe(alice1);
    expect(Object.isFrozen(alice1)).toBe(true);
    expect(got.get("bob")).toEqual([]);
    const [admin1] = got.get("admin 1")!;
    expect(admin1).toEqual([removed("a"), removed("c")]);
    expect(got.get("admin 2")![0]).toBe(admin1);
  });

  test("per-notification subscribers get the coalesced tick in order; a throwing one stops nobody", async () => {
    const hub = new NotificationHub();
    const seen: Notification[] = [];
    hub.subscribe(ADMIN, () => {
      throw new Error("faulty subscriber");
    });
    hub.subscribe(ADMIN, (n) => {
      if (n.name === "agent.error" && n.value.message === "boom") throw new Error("faulty on one");
      seen.push(n);
    });
    hub.publish("alice", failed("a", "boom"));
    hub.publish("alice", removed("a"));
    await vi.waitFor(() => expect(seen).toEqual([removed("a")]));
  });

  test("unsubscribed and cleared subscribers receive nothing more", async () => {
    const hub = new NotificationHub();
    const early: Notification[] = [];
    const late: Notification[] = [];
    const stop = hub.subscribe(alice, (n) => early.push(n));
    hub.subscribe(alice, (n) => late.push(n));
    hub.publish("alice", removed("a1"));
    await vi.waitFor(() => expect(late).toHaveLength(1));
    stop();
    hub.publish("alice", removed("a2"));
    await vi.waitFor(() => expect(late).toHaveLength(2));
    expect(early).toEqual([removed("a1")]);
    hub.publish("alice", removed("a3"));
    hub.clear();
    hub.publish("alice", removed("a4"));
    await Promise.resolve();
    expect(late).toEqual([removed("a1"), removed("a2")]);
  });
});
