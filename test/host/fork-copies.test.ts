import { describe, expect, test } from "vitest";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import type { Principal } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import type { ForkInput } from "../../src/store/session-store.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { userMessage } from "../store/open-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { withMembers } from "../support/with-members.js";
import { errorCode } from "./host-fixture.js";

const ALICE: Principal = { name: "alice", admin: false };
const BOB: Principal = { name: "bob", admin: false };

const disposers = cleanupsAfterEach();

/**
 * A fork copies its prefix in one transaction, and the store commits the writes queued in one turn
 * of the event loop together: forks sent at once were copied in one transaction, their prefixes
 * held and copied in the same turn (16 forks of 32,000 events held a real host's loop 27 s).
 */
describe("forks sent at once", () => {
  test("are copied one at a time, and a principal's past four under way is overloaded and creates nothing", async () => {
    const dir = tempDir();
    const store = SqliteSessionStore.open(dir.file("sessions.db"));
    let copying = 0;
    let most = 0;
    const counted = withMembers(store, {
      fork: async (input: ForkInput) => {
        most = Math.max(most, ++copying);
        try {
          return await store.fork(input);
        } finally {
          copying--;
        }
      },
    });
    const host = new SessionHost({ store: counted, agent: new DemoAgent() });
    await host.start();
    disposers.push(async () => {
      await host.shutdown();
      await store.close();
      dir.remove();
    });
    for (const [principal, sessionId] of [
      [ALICE, "a-src"],
      [BOB, "b-src"],
    ] as const) {
      await host.call(principal, "session.create", { sessionId });
      await store.append(sessionId, [userMessage("one"), userMessage("two")]);
    }
    const fork = (principal: Principal, sourceId: string, sessionId: string) =>
      host.call(principal, "session.fork", { sourceId, sessionId });
    const aliceForks = ["a1", "a2", "a3", "a4"].map((id) => fork(ALICE, "a-src", id));
    const bobFork = fork(BOB, "b-src", "b1");
    const refused = await errorCode(() => fork(ALICE, "a-src", "a5"));
    expect(refused).toEqual({ code: "overloaded", data: { limit: "forks_per_principal", max: 4 } });
    const headers = await Promise.all([...aliceForks, bobFork]);
    expect(headers.map((r) => r.header.forkOf)).toEqual([
      ...Array.from({ length: 4 }, () => ({ sessionId: "a-src", seq: 3 })),
      { sessionId: "b-src", seq: 3 },
    ]);
    expect(most).toBe(1);
    expect((await store.header("a5")).status).toBe("not_found");
    // answered forks give their places back
    const again = await fork(ALICE, "a-src", "a5");
    expect(again.header.sessionId).toBe("a5");
  });
});
