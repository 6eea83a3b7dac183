import { describe, expect, it, vi } from "vitest";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { pgUrl } from "../store/contract/backends.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { gate } from "../support/gate.js";
import { idleWriter, logOf, openAnswerLostStore } from "./answer-lost-fixture.js";
import { demoAgentWith } from "./host-fixture.js";

/**
 * A turn's `turn/end` whose COMMIT reached PostgreSQL, its connection lost before the host read the
 * answer: the host tries the end again, and the store, not the host's memory, keeps it from being
 * written twice.
 */

const cleanups = cleanupsAfterEach();

describe.skipIf(!pgUrl)("a turn whose end committed though the host lost the answer", () => {
  it("ends once in the log when the host writes its end again; the prompt queued behind it runs after it", async () => {
    const { store, cutNextCommitAnswer, cutAtCommit } = await openAnswerLostStore(
      cleanups,
      "smx_turn_end_lost",
    );
    const held = gate();
    const running = gate();
    const agent = demoAgentWith("held", async (turn) => {
      if (turn.prompt.text === "wait") {
        running.open();
        await held.promise;
      }
      return { state: "completed" };
    });
    const host = new SessionHost({ store, agent });
    await host.start();
    cleanups.push(() => host.shutdown());
    const prompt = (text: string) =>
      host.call(ADMIN, "session.prompt", { sessionId: "s1", text, clientMessageId: text });
    await host.call(ADMIN, "session.create", { sessionId: "s1" });
    const first = await prompt("wait");
    expect(await prompt("next")).toMatchObject({ queued: true });
    await running.promise;
    await idleWriter();

    cutNextCommitAnswer();
    held.open();
    await vi.waitFor(() => expect(cutAtCommit()).toBeGreaterThanOrEqual(1), { timeout: 10_000 });
    const log = await vi.waitFor(
      async () => {
        const events = await logOf(store, "s1");
        expect(events.filter((e) => e.type === "user/message")).toHaveLength(2);
        expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
        return events;
      },
      { timeout: 15_000, interval: 50 },
    );
    const ends = log.flatMap((e) => (e.type === "turn/end" ? [e.data.turnId] : []));
    const starts = log.flatMap((e) => (e.type === "turn/start" ? [e.data.turnId] : []));
    // before, the first turn's end was in the log twice
    expect(ends).toEqual(starts);
    expect(starts[0]).toBe(first.turnId);
  }, 40_000);
});
