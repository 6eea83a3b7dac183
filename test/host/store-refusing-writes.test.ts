import { afterEach, describe, expect, test, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import { capturedLogger } from "../support/log-capture.js";
import { beforeAppend, type HostFixture, heldAgent, openHost, readLog } from "./host-fixture.js";

/**
 * A store that refuses writes (a full disk, storage turned read-only) while turns end and queued
 * prompts wait: the host pauses between attempts instead of spinning, keeps the log's turns
 * closed, and carries on once writes work again.
 */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "refused";

const prompt = (text: string) =>
  fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: text });

const turnStarts = (log: SessionEvent[]) =>
  log.flatMap((e) => (e.type === "turn/start" ? [e.data.turnId] : []));
const turnEnds = (log: SessionEvent[]) =>
  log.flatMap((e) => (e.type === "turn/end" ? [`${e.data.turnId} ${e.data.state}`] : []));

/**
 * Counts the appends that take a queued prompt off the queue; storage refuses writes from the
 * first of them on.
 */
function refuseFromQueuedStart(): { count: number } {
  const seen = { count: 0 };
  const append = fx.store.append.bind(fx.store);
  vi.spyOn(fx.store, "append").mockImplementation(async (sessionId, events, options) => {
    if (options?.dequeue) {
      seen.count++;
      fx.store.refuseWrites(true);
    }
    return append(sessionId, events, options);
  });
  return seen;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("a store refusing writes", () => {
  test("a queued prompt it cannot start is tried again after a pause, warned once, and runs once writes work again", async () => {
    const log = capturedLogger();
    const { agent, release } = heldAgent();
    fx = await openHost({ agent, logger: log.logger });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const first = await prompt("wait");
    expect(await prompt("queued")).toMatchObject({ queued: true });
    const starts = refuseFromQueuedStart();
    release();
    const refusedLines = () => log.lines.filter((l) => l.msg === "queued prompt could not start");
    await vi.waitFor(() => expect(refusedLines()).toHaveLength(1), { timeout: 10_000, interval: 5 });
    // a host that tried again at once made hundreds of attempts (and log lines) in this time
    await pause(200);
    expect(starts.count).toBe(1);
    expect(refusedLines()[0]).toMatchObject({
      level: 40,
      sessionId: S,
      err: { code: "persistence_failure" },
    });

    vi.mocked(fx.store.append).mockRestore();
    fx.store.refuseWrites(false);
    const events = await vi.waitFor(
      async () => {
        const events = await readLog(fx.store, S);
        expect(turnEnds(events)).toHaveLength(2);
        return events;
      },
      { timeout: 20_000, interval: 20 },
    );
    const [, second] = turnStarts(events);
    expect(turnEnds(events)).toEqual([`${first.turnId} completed`, `${second} completed`]);
    expect(fx.host.live.queue(S)).toEqual([]);
    expect(refusedLines().filter((l) => (l.level as number) >= 40)).toHaveLength(1);
  });

  test("a turn/end it refuses is written once writes work again, before the next queued prompt starts: no turn is left open in the log", async () => {
    const log = capturedLogger();
    const { agent, release } = heldAgent();
    fx = await openHost({ agent, logger: log.logger });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const first = await prompt("wait");
    expect(await prompt("queued")).toMatchObject({ queued: true });
    const refused = beforeAppend(
      fx.store,
      (events) => events[0]?.type === "turn/end",
      async () => fx.store.refuseWrites(true),
    );
    release();
    await vi.waitFor(() => expect(refused.ran).toBe(true), { timeout: 10_000, interval: 5 });
    await pause(50);
    fx.store.refuseWrites(false);
    const events = await vi.waitFor(
      async () => {
        const events = await readLog(fx.store, S);
        expect(events.filter((e) => e.type === "user/message")).toHaveLength(2);
        expect(events.at(-1)?.type).toBe("turn/end");
        return events;
      },
      { timeout: 20_000, interval: 20 },
    );
    const [firstStart, second] = turnStarts(events);
    expect(firstStart).toBe(first.turnId);
    // each turn ends before the next one starts
    expect(events.map((e) => e.type).filter((t) => t === "turn/start" || t === "turn/end")).toEqual([
      "turn/start",
      "turn/end",
      "turn/start",
      "turn/end",
    ]);
    expect(turnEnds(events)).toEqual([`${first.turnId} completed`, `${second} completed`]);
  });

  test("a turn/end still refused when the host shuts down does not hold the shutdown; the next start closes the turn interrupted", async () => {
    const { agent, release } = heldAgent();
    fx = await openHost({ agent });
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const first = await prompt("wait");
    const refused = beforeAppend(
      fx.store,
      (events) => events[0]?.type === "turn/end",
      async () => fx.store.refuseWrites(true),
    );
    release();
    await vi.waitFor(() => expect(refused.ran).toBe(true), { timeout: 10_000, interval: 5 });
    await fx.host.shutdown();
    fx.store.refuseWrites(false);
    await fx.restart();
    const events = await readLog(fx.store, S);
    expect(turnEnds(events)).toEqual([`${first.turnId} interrupted`]);
  });
});
