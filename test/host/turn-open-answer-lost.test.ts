import { describe, expect, it, vi } from "vitest";
import { type SessionEvent, SessionmuxError } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { QUERY_CHECK_MS } from "../../src/store/postgres/pg-backend-watch.js";
import { KEPT_AFTER_IDLE_MS } from "../../src/store/postgres/pg-group-commit.js";
import type { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { pgUrl } from "../store/contract/backends.js";
import { openStoreBehindProxy } from "../store/postgres/store-behind-proxy.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { readWholeLog } from "../support/whole-log.js";
import { demoAgentWith } from "./host-fixture.js";

/**
 * A turn's opening append whose COMMIT reached PostgreSQL, its connection lost before the host
 * read the answer: the write failed as far as the host could tell, yet the turn is in the log.
 */

const cleanups = cleanupsAfterEach();

/** Lets the group commit's connection idle past the bound of a batch on kept states. */
const idleWriter = () => new Promise((resolve) => setTimeout(resolve, KEPT_AFTER_IDLE_MS + 100));

async function logOf(store: PostgresSessionStore, sessionId: string): Promise<SessionEvent[]> {
  const read = await readWholeLog(store, sessionId);
  if (read.status !== "ok") throw new Error(read.status);
  return read.events;
}

describe.skipIf(!pgUrl)("a prompt whose turn opened though the host lost the answer", () => {
  it("runs its turn to its end and answers it, as does the prompt sent again", async () => {
    // the store's own check interval (the fixture's is shorter)
    const { store, cutNextCommitAnswer, cutAtCommit } = await openStoreBehindProxy(
      cleanups,
      "smx_turn_open_lost",
      { queryCheckMs: QUERY_CHECK_MS },
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
