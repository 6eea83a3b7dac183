import { afterEach, expect, test, vi } from "vitest";
import { ADMIN } from "../../src/host/principal.js";
import { demoAgentWith, type HostFixture, openHost, readLog } from "./host-fixture.js";

/** A job's progress is a store row, last wins: how many writes its reports cost, on a real SQLite store. */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

test("a job reporting progress 5,000 times in one go costs a few store writes, not one each; its end follows them", async () => {
  const agent = demoAgentWith("reports", async (turn) => {
    const job = turn.startJob("index");
    for (let i = 1; i <= 5000; i++) job.progress(i / 5000);
    job.complete();
    return { state: "completed" };
  });
  fx = await openHost({ agent });
  await fx.host.call(ADMIN, "session.create", { sessionId: "s1" });
  const before = fx.store.stats().transactions;
  await fx.host.call(ADMIN, "session.prompt", { sessionId: "s1", text: "go", clientMessageId: "go" });
  const log = await vi.waitFor(
    async () => {
      const events = await readLog(fx.store, "s1");
      expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(["job/ended", "turn/end"]));
      return events;
    },
    // before, about 17 s on the 2-core VM
    { timeout: 60_000, interval: 20 },
  );
  expect(log.find((e) => e.type === "job/ended")?.data).toMatchObject({ state: "completed" });
  // before, 5,003: each report a transaction of its own, one after another, the job's end behind them
  expect(fx.store.stats().transactions - before).toBeLessThan(20);
}, 90_000);
