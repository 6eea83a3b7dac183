import { getEventListeners } from "node:events";
import { from, Observable, ReplaySubject, Subject } from "rxjs";
import { describe, expect, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { iterate } from "../../src/client/async-iteration.js";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { ADMIN_TOKEN, startTestHost } from "../support/host.js";

const cleanups = cleanupsAfterEach();

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
    const boom = new Error("boom");
    subject.next(1);
    subject.error(boom);
    expect(await it.next()).toEqual({ value: 1, done: false });
    await expect(it.next()).rejects.toBe(boom);
    expect(await it.next()).toEqual({ value: undefined, done: true });
  });

  it("a loop body that falls maxBuffered values behind ends with slow_consumer and unsubscribes", async () => {
    const subject = new Subject<number>();
    const it = iterate(subject, { maxBuffered: 3 });
    for (let i = 0; i < 4; i++) subject.next(i);
    expect(subject.observed).toBe(false);
    for (let i = 0; i < 3; i++) expect((await it.next()).value).toBe(i);
    await expect(it.next()).rejects.toMatchObject({
      code: "slow_consumer",
      message: "the loop fell 3 values behind; raise maxBuffered or read faster",
      data: { maxBuffered: 3 },
    });
  });

  it("a next() that waits when the source completes resolves as done", async () => {
    const subject = new Subject<number>();
    const it = iterate(subject);
    const waiting = it.next();
    subject.complete();
    expect(await waiting).toStrictEqual({ value: undefined, done: true });
  });

  it("a synchronous replay longer than maxBuffered ends with slow_consumer and leaves the source", async () => {
    const replay = new ReplaySubject<number>();
    for (let i = 0; i < 4; i++) replay.next(i);
    const it = iterate(replay, { maxBuffered: 3 });
    // the source ran past the limit before subscribe returned; it must not stay subscribed
    expect(replay.observed).toBe(false);
    for (let i = 0; i < 3; i++) expect((await it.next()).value).toBe(i);
    await expect(it.next()).rejects.toMatchObject({ code: "slow_consumer" });

    // a source that completes right after overflowing still reports the overflow, not a clean end
    const finite = iterate(from([0, 1, 2, 3]), { maxBuffered: 3 });
    for (let i = 0; i < 3; i++) expect((await finite.next()).value).toBe(i);
    await expect(finite.next()).rejects.toMatchObject({ code: "slow_consumer" });
  });

  it("return() resolves as done, ends a waiting next() and every later one, and unsubscribes", async () => {
    const subject = new Subject<number>();
    const it = iterate(subject);
    const waiting = it.next();
    expect(await it.return?.()).toStrictEqual({ value: undefined, done: true });
    expect(await waiting).toStrictEqual({ value: undefined, done: true });
    expect(await it.next()).toStrictEqual({ value: undefined, done: true });
    expect(subject.observed).toBe(false);
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
    const reason = new Error("user left");
    controller.abort(reason);
    await expect(waiting).rejects.toMatchObject({
      code: "aborted",
      message: "the iteration was aborted",
      cause: reason,
    });
    expect(subject.observed).toBe(false);
  });

  it("a signal aborted before the loop starts ends it with aborted without subscribing", async () => {
    const subject = new Subject<number>();
    const controller = new AbortController();
    const reason = new Error("too late");
    controller.abort(reason);
    const it = iterate(subject, { signal: controller.signal });
    expect(subject.observed).toBe(false);
    await expect(it.next()).rejects.toMatchObject({
      code: "aborted",
      message: "the iteration was aborted",
      cause: reason,
    });
    expect(await it.next()).toStrictEqual({ value: undefined, done: true });
  });

  it("values a synchronous source emits after the abort are not delivered", async () => {
    const controller = new AbortController();
    const source = new Observable<number>((s) => {
      s.next(1);
      controller.abort();
      s.next(2);
    });
    const it = iterate(source, { signal: controller.signal });
    expect(await it.next()).toStrictEqual({ value: 1, done: false });
    await expect(it.next()).rejects.toMatchObject({ code: "aborted" });
  });

  it("next() calls made before any value arrives are answered in call order, none left pending", async () => {
    const subject = new Subject<number>();
    const it = iterate(subject);
    const answers: [number, IteratorResult<number>][] = [];
    for (const n of [0, 1, 2]) void it.next().then((r) => answers.push([n, r]));
    subject.next(10);
    subject.next(11);
    subject.complete();
    // every answer is due by now: each was settled synchronously above
    await new Promise((resolve) => setImmediate(resolve));
    expect(answers).toStrictEqual([
      [0, { value: 10, done: false }],
      [1, { value: 11, done: false }],
      [2, { value: undefined, done: true }],
    ]);
  });

  it("an error reaches the first of the waiting next() calls once; the others and later ones are done", async () => {
    const subject = new Subject<number>();
    const it = iterate(subject);
    const answers: [number, unknown][] = [];
    for (const n of [0, 1]) {
      void it.next().then(
        (r) => answers.push([n, r]),
        (e: unknown) => answers.push([n, { rejected: e }]),
      );
    }
    const boom = new Error("boom");
    subject.error(boom);
    await new Promise((resolve) => setImmediate(resolve));
    expect(answers).toStrictEqual([
      [0, { rejected: boom }],
      [1, { value: undefined, done: true }],
    ]);
    expect(await it.next()).toStrictEqual({ value: undefined, done: true });

    // the same for an abort that ends one waiting loop
    const controller = new AbortController();
    const aborted = iterate(new Subject<number>(), { signal: controller.signal });
    const waiting = aborted.next();
    controller.abort();
    await expect(waiting).rejects.toMatchObject({ code: "aborted" });
    expect(await aborted.next()).toStrictEqual({ value: undefined, done: true });
  });

  it("a loop that ends leaves no listener on the caller's signal", async () => {
    // One long-lived signal often serves many loops; a listener left per loop would pile up.
    const controller = new AbortController();
    const listeners = () => getEventListeners(controller.signal, "abort").length;
    const completed = new Subject<number>();
    const done = iterate(completed, { signal: controller.signal });
    expect(listeners()).toBe(1);
    completed.complete();
    expect(await done.next()).toStrictEqual({ value: undefined, done: true });
    expect(listeners()).toBe(0);

    const broken = new Subject<number>();
    const early = iterate(broken, { signal: controller.signal });
    expect(listeners()).toBe(1);
    await early.return?.();
    expect(listeners()).toBe(0);
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
