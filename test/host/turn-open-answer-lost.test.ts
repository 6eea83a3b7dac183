import { describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { pgUrl } from "../store/contract/backends.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { idleWriter, logOf, openAnswerLostStore } from "./answer-lost-fixture.js";
import { demoAgentWith } from "./host-fixture.js";

/**
 * A turn's opening append whose COMMIT reached PostgreSQL, its connection lost before the host
 * read the answer: the write failed as far as the host could tell, yet the turn is in the log.
 */

const cleanups = cleanupsAfterEach();

describe.skipIf(!pgUrl)("a prompt whose turn opened though the host lost the answer", () => {
  it("runs its turn to its end and answers it, as does the prompt sent again", async () => {
    const { store, cutNextCommitAnswer, cutAtCommit } = await openAnswerLostStore(
      cleanups,
      "smx_turn_open_lost",
    );
    const ran: string[] = [];
    const agent = demoAgentWith("records", async (turn) => {
      ran.push(turn.prompt.text);
      return { state: "completed" };
    });
    const host = new SessionHost({ store, agent });
    await host.start();
    cleanups.push(() => host.shutdown());
    await host.call(ADMIN, "session.create", { sessionId: "s1" });
    await idleWriter();

    cutNextCommitAnswer();
    const send = () =>
      host
        .call(ADMIN, "session.prompt", { sessionId: "s1", text: "once", clientMessageId: "k1" })
        .catch((err: unknown) =>
          err instanceof SessionmuxError ? { code: err.code } : { untyped: String(err) },
        );
    const answer = await send();
    expect(cutAtCommit()).toBeGreaterThanOrEqual(1);
    // before, persistence_failure, and the turn stayed open in the log with no agent running it
    expect(answer).toMatchObject({ queued: false, turnId: expect.any(String), seq: expect.any(Number) });
    const { turnId } = answer as { turnId: string };
    const log = await vi.waitFor(
      async () => {
        const events = await logOf(store, "s1");
        expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { turnId, state: "completed" } });
        return events;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(ran).toEqual(["once"]);
    expect(log.filter((e) => e.type === "turn/start")).toHaveLength(1);
    expect(await send()).toEqual(answer);
  }, 30_000);
});
