import fc from "fast-check";
import { describe, expect, test, vi } from "vitest";
import type { Notification } from "../../protocol/index.js";
import { NotificationHub } from "../../src/host/notifications.js";
import { ADMIN, canSee, type Principal } from "../../src/host/principal.js";

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

  test("every subscriber gets exactly what it may see of a tick, in publish order, whatever the owners", async () => {
    const names = ["alice", "bob", "carol", "admin"];
    const principal = fc.record({ name: fc.constantFrom(...names), admin: fc.boolean() });
    const publication = fc.record({
      owner: fc.constantFrom(...names),
      session: fc.nat(3),
      // most ticks have no entry for one principal only (the shared path), some have one
      only: fc.oneof({ weight: 12, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: principal }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(principal, { minLength: 1, maxLength: 8 }),
        fc.array(publication, { minLength: 1, maxLength: 12 }),
        fc.nat(7),
        async (subscribers, publications, leaving) => {
          const hub = new NotificationHub();
          const got = subscribers.map(() => [] as (readonly Notification[])[]);
          const stops = subscribers.map((p, i) => hub.subscribeLists(p, (list) => got[i]!.push(list)));
          // one subscriber leaves before the tick: it must hear nothing of it
          const gone = leaving < subscribers.length ? leaving : -1;
          if (gone >= 0) stops[gone]!();
          const published = publications.map((p, i) => ({ ...p, notification: removed(`${p.owner}-${i}`) }));
          for (const p of published) {
            if (p.only) hub.publishTo(p.only, p.owner, p.notification);
            else hub.publish(p.owner, p.notification);
          }
          await Promise.resolve();
          subscribers.forEach((s, i) => {
            const visible = published
              .filter((p) =>
                p.only ? p.only.name === s.name && p.only.admin === s.admin : canSee(s, p.owner),
              )
              .map((p) => p.notification);
            const expected = i === gone || visible.length === 0 ? [] : [visible];
            expect(got[i]).toEqual(expected);
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  test("an unsubscribe called twice or after clear does nothing, and a name none listens for is not kept", () => {
    const hub = new NotificationHub();
    const first = hub.subscribeLists(alice, () => undefined);
    const second = hub.subscribeLists(alice, () => undefined);
    hub.subscribeLists(bob, () => undefined);
    expect(hub.subscribedNames).toBe(2);
    first();
    expect(hub.subscribedNames).toBe(2);
    second();
    expect(hub.subscribedNames).toBe(1);
    expect(() => second()).not.toThrow();
    const late = hub.subscribeLists(alice, () => undefined);
    hub.clear();
    expect(hub.subscribedNames).toBe(0);
    expect(() => late()).not.toThrow();
  });

  test("in a tick holding a notification for one principal, subscribers of one name still share one list", async () => {
    const hub = new NotificationHub();
    const lists: (readonly Notification[])[] = [];
    hub.subscribeLists(alice, (list) => lists.push(list));
    hub.subscribeLists(alice, (list) => lists.push(list));
    hub.publish("alice", removed("a1"));
    hub.publishTo(alice, "alice", removed("a2"));
    await vi.waitFor(() => expect(lists).toHaveLength(2));
    expect(lists[0]).toEqual([removed("a1"), removed("a2")]);
    expect(lists[1]).toBe(lists[0]);
  });
});

describe("NotificationHub names", () => {
  test("tells of a name when its first subscriber arrives, and lists the names subscribed", () => {
    const hub = new NotificationHub();
    const arrived: string[] = [];
    const stop = hub.onArrival((name) => arrived.push(name));
    const offAlice = hub.subscribe(alice, () => undefined);
    hub.subscribe(alice, () => undefined);
    hub.subscribe(ADMIN, () => undefined);
    hub.subscribe({ name: "alice", admin: true }, () => undefined);
    expect(arrived).toEqual(["alice", "admin"]);
    expect([...hub.names()].sort()).toEqual(["admin", "alice"]);
    expect(hub.listensFor("admin")).toBe(true);
    expect(hub.listensFor("bob")).toBe(false);
    offAlice();
    const offBob = hub.subscribe(bob, () => undefined);
    offBob();
    hub.subscribe(bob, () => undefined);
    expect(arrived).toEqual(["alice", "admin", "bob", "bob"]);
    stop();
    hub.subscribe({ name: "carol", admin: false }, () => undefined);
    expect(arrived).toHaveLength(4);
  });
});
