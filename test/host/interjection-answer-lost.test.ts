import { describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { pgUrl } from "../store/contract/backends.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { gate } from "../support/gate.js";
import { idleWriter, logOf, openAnswerLostStore } from "./answer-lost-fixture.js";
import { demoAgentWith } from "./host-fixture.js";

/**
 * A steered prompt whose interjection (its `user/message` and its removal from the queue) reached
 * PostgreSQL's COMMIT, its connection lost before the host read the answer: the prompt is in the
 * log as taken and off the queue, so the agent must be handed it, or nobody ever reads it.
 */

const cleanups = cleanupsAfterEach();

describe.skipIf(!pgUrl)("an interjection that committed though the host lost the answer", () => {
  it("is handed to the agent, once, as the log records it taken", async () => {
    const { store, cutNextCommitAnswer, cutAtCommit } = await openAnswerLostStore(
      cleanups,
      "smx_interjection_lost",
    );
    const running = gate();
    const steered = gate();
    const took: unknown[] = [];
    const agent = demoAgentWith("steered", async (turn) => {
      if (turn.prompt.text !== "wait") return { state: "completed" };
      running.open();
      await steered.promise;
      took.push(
        await turn
          .takeInterjections()
          .catch((err: unknown) => (err instanceof SessionmuxError ? err.code : String(err))),
      );
      return { state: "completed" };
    });
    const host = new SessionHost({ store, agent });
    await host.start();
    cleanups.push(() => host.shutdown());
    await host.call(ADMIN, "session.create", { sessionId: "s1" });
    await host.call(ADMIN, "session.prompt", { sessionId: "s1", text: "wait", clientMessageId: "w" });
    await running.promise;
    const queued = await host.call(ADMIN, "session.prompt", {
      sessionId: "s1",
      text: "extra",
      clientMessageId: "x",
    });
    await host.call(ADMIN, "session.updateQueue", {
      sessionId: "s1",
      op: { steer: true, itemId: queued.itemId! },
    });
    await idleWriter();

    cutNextCommitAnswer();
    steered.open();
    await vi.waitFor(() => expect(cutAtCommit()).toBeGreaterThanOrEqual(1), { timeout: 10_000 });
    const log = await vi.waitFor(
      async () => {
        const events = await logOf(store, "s1");
        expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
        return events;
      },
      { timeout: 15_000, interval: 50 },
    );
    const messages = log.flatMap((e) => (e.type === "user/message" ? [e.data] : []));
    expect(messages).toEqual([
      expect.objectContaining({ text: "wait" }),
      expect.objectContaining({ text: "extra", interjection: true }),
    ]);
    // before, the agent was told persistence_failure for a prompt the log shows it took
    expect(took).toEqual([["extra"]]);
    // the host's copy of the queue learns of the removal from the store's notices, which a lost
    // answer delays: it must come, not be there at once
    await vi.waitFor(() => expect(host.live.queue("s1")).toEqual([]), { timeout: 10_000 });
  }, 40_000);
});
