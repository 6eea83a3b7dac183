import { Subject } from "rxjs";
import { afterEach, describe, expect, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { iterate } from "../../src/client/async-iteration.js";
import { createNodeClient } from "../../src/client/node.js";
import { ADMIN_TOKEN, startTestHost } from "../support/host.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("async iteration of observables", () => {
  it("yields buffered and later values in order, ends on complete", async () => {
    const subject = new Subject<number>();
    const it = iterate(subject);
    const first = it.next();
    subject.next(1);
    subject.next(2);
    subject.next(3);
    subject.complete();
    expect(await first).toEqual({ value: 1, done: false });
    expect(await it.next()).toEqual({ value: 2, done: false });
    expect(await it.next()).toEqual({ value: 3, done: false });
    expect(await it.next()).toEqual({ value: undefined, done: true });
  });

  it("rethrows the observable's error after the values before it", async () => {
    const subject = new Subject<number>();
    const it = iterate(subject);
    subject.next(1);
    subject.error(new Error("boom"));
    expect(await it.next()).toEqual({ value: 1, done: false });
    await expect(it.next()).rejects.toThrow("boom");
    expect(await it.next()).toEqual({ value: undefined, done: true });
  });

  it("a loop body that falls maxBuffered values behind ends with slow_consumer and unsubscribes", async () => {
    const subject = new Subject<number>();
    const it = iterate(subject, { maxBuffered: 3 });
    for (let i = 0; i < 4; i++) subject.next(i);
    expect(subject.observed).toBe(false);
    for (let i = 0; i < 3; i++) expect((await it.next()).value).toBe(i);
    await expect(it.next()).rejects.toMatchObject({ code: "slow_consumer", data: { maxBuffered: 3 } });
  });

  it("break unsubscribes; an AbortSignal ends a waiting loop with aborted", async () => {
    const subject = new Subject<number>();
    const broken = iterate(subject);
    subject.next(7);
    for await (const value of broken) {
      expect(value).toBe(7);
      break;
    }
    expect(subject.observed).toBe(false);

    const controller = new AbortController();
    const waiting = iterate(subject, { signal: controller.signal }).next();
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: "aborted" });
    expect(subject.observed).toBe(false);
  });
});

describe("client.follow with for await", () => {
  it("reads a real session's log, then stops following on break", async () => {
    const host = await startTestHost();
    cleanups.push(() => host.dispose());
    const client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
    cleanups.push(() => client.close());
    await client.create({ sessionId: "it" });
    await client.call("session.rename", { sessionId: "it", title: "two" });
    const events: SessionEvent[] = [];
    for await (const update of client.follow("it")) {
      if (update.kind === "events") events.push(...update.events);
      if (update.kind === "caughtUp") break;
    }
    expect(events.map((e) => e.seq)).toEqual([1, 2]);
    // The observable face still works beside the iterator.
    const seen: string[] = [];
    const sub = client.follow("it").subscribe((u) => seen.push(u.kind));
    cleanups.push(() => sub.unsubscribe());
    await expect.poll(() => seen.includes("caughtUp")).toBe(true);
  });
});
