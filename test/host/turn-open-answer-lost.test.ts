import { randomBytes } from "node:crypto";
import { describe, expect, it, vi } from "vitest";
import { type SessionEvent, SessionmuxError } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { KEPT_AFTER_IDLE_MS } from "../../src/store/postgres/pg-group-commit.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { dropSchema, pgUrl } from "../store/contract/backends.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
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
    const url = new URL(pgUrl!);
    let armed = false;
    let cutAtCommit = 0;
    const proxy = await startTcpProxy(Number(url.port || 5432), {
      tap: () => ({
        fromClient() {},
        // the server's answer to COMMIT, before it is passed on: committed, and lost to the host
        fromHost(chunk) {
          if (armed && chunk.includes("COMMIT\0")) {
            armed = false;
            cutAtCommit = proxy.cutAll();
          }
        },
      }),
    });
    cleanups.push(() => proxy.stop());
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const schema = `smx_turn_open_lost_${randomBytes(4).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl!, schema));
    const store = await PostgresSessionStore.open(url.toString(), { schema, maxConnections: 2 });
    cleanups.push(() => store.close().catch(() => undefined));
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

    armed = true;
    const send = () =>
      host
        .call(ADMIN, "session.prompt", { sessionId: "s1", text: "once", clientMessageId: "k1" })
        .catch((err: unknown) =>
          err instanceof SessionmuxError ? { code: err.code } : { untyped: String(err) },
        );
    const answer = await send();
    expect(cutAtCommit).toBeGreaterThanOrEqual(1);
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
