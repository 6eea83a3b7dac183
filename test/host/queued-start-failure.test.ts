import { expect, test, vi } from "vitest";
import { type SessionEvent, SessionmuxError } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import type { HostStore } from "../../src/store/live-state-store.js";
import { describeContract, storeFixture } from "../store/contract/backends.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { gate } from "../support/gate.js";
import { readWholeLog } from "../support/whole-log.js";
import { demoAgentWith } from "./host-fixture.js";

/**
 * A queued prompt whose start fails in a way no retry mends (a refusal of its own, a fault of the
 * code that prepares it) ends as a failed turn in the log, naming why, and the queue goes on. It
 * used to be tried again for good, every later prompt of its session waiting behind it.
 */

const cleanups = cleanupsAfterEach(() => vi.restoreAllMocks());
const S = "doomed-start";

async function logOf(store: HostStore): Promise<SessionEvent[]> {
  const read = await readWholeLog(store, S);
  if (read.status !== "ok") throw new Error(read.status);
  return read.events;
}

/** Fails the opening append of the queued prompt `text` (the turn's start, not any later write). */
function failStartOf(store: HostStore, text: string, fault: () => Error): { attempts: number } {
  const seen = { attempts: 0 };
  const append = store.append.bind(store);
  vi.spyOn(store, "append").mockImplementation(async (sessionId, events, options) => {
    const message = events.find((e) => e.type === "user/message");
    const opening = options?.dequeue && events.length === 2;
    if (opening && message?.type === "user/message" && message.data.text === text) {
      seen.attempts++;
      throw fault();
    }
    return append(sessionId, events, options);
  });
  return seen;
}

describeContract("a queued prompt that cannot start", (backend) => {
  const open = storeFixture(backend);

  async function openHost() {
    const { store } = await open();
    const held = gate();
    const ran: string[] = [];
    const agent = demoAgentWith("held", async (turn) => {
      ran.push(turn.prompt.text);
      if (turn.prompt.text === "wait") await held.promise;
      return { state: "completed" };
    });
    const host = new SessionHost({ store, agent });
    await host.start();
    cleanups.push(() => host.shutdown());
    await host.call(ADMIN, "session.create", { sessionId: S });
    const prompt = (text: string) =>
      host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: text });
    return { store, host, ran, release: held.open, prompt };
  }

  const faults: [string, () => Error, string][] = [
    [
      "refused for good (a typed error no retry mends)",
      () => new SessionmuxError("payload_too_large", "a user/message event is over the limit"),
      "payload_too_large",
    ],
    [
      "failed by a fault of the host's own (an untyped error)",
      () => new TypeError("x is undefined"),
      "internal_error",
    ],
  ];

  for (const [title, fault, code] of faults) {
    test(`${title} ends failed in the log with its code, is not tried again, and the prompts behind it run`, async () => {
      const { store, host, ran, release, prompt } = await openHost();
      await prompt("wait");
      const doomed = await prompt("doomed");
      expect(doomed).toMatchObject({ queued: true });
      await prompt("after");
      const start = failStartOf(store, "doomed", fault);
      release();

      const log = await vi.waitFor(
        async () => {
          const events = await logOf(store);
          expect(events.filter((e) => e.type === "turn/end")).toHaveLength(3);
          return events;
        },
        { timeout: 10_000, interval: 20 },
      );
      expect(start.attempts).toBe(1);
      expect(ran).toEqual(["wait", "after"]);
      const failedTurn = log.filter((e) => e.type === "turn/start")[1];
      if (failedTurn?.type !== "turn/start") throw new Error("the failed prompt opened no turn");
      expect(failedTurn.data).toEqual({ turnId: expect.any(String), trigger: "queue" });
      const { turnId } = failedTurn.data;
      const opened = log.findIndex((e) => e === failedTurn);
      expect(log[opened + 1]).toMatchObject({ type: "user/message", data: { text: "doomed" } });
      expect(log[opened + 2]).toMatchObject({
        type: "turn/end",
        data: { turnId, state: "failed", code, error: expect.stringContaining("could not start") },
      });
      expect(log.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
      expect(host.live.queue(S)).toEqual([]);
      // the prompt sent again answers the turn it became, and starts nothing
      expect(await prompt("doomed")).toMatchObject({ queued: false, turnId });
      expect((await logOf(store)).length).toBe(log.length);
    }, 20_000);
  }
});
