import { expect, test } from "vitest";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { gate } from "../support/gate.js";
import { tempDir } from "../support/temp-dir.js";
import { demoAgentWith } from "./host-fixture.js";

/**
 * A principal at its live-agent limit: an agent a call resolved for work and has not yet given it
 * (a prompt between its session's resolution and its turn) is not an idle one to detach for
 * another session's agent.
 */

test("two prompts to two sessions at a limit of one agent, however they interleave: one runs and can be cancelled, the other is refused", async () => {
  // the second prompt is sent 0 to 15 microtask hops after the first, so that one of them lands
  // between the other's attach and the start of its turn
  for (let hops = 0; hops <= 15; hops++) {
    const held = gate();
    const ran: string[] = [];
    const agent = demoAgentWith("held", async (turn) => {
      ran.push(turn.sessionId);
      await held.promise;
      return { state: "completed" };
    });
    const dir = tempDir();
    const store = SqliteSessionStore.open(dir.file("sessions.db"));
    const host = new SessionHost({ store, agent, maxLiveAgentsPerPrincipal: 1 });
    await host.start();
    try {
      for (const sessionId of ["s1", "s2"]) await host.call(ADMIN, "session.create", { sessionId });
      const send = (sessionId: string) =>
        host.call(ADMIN, "session.prompt", { sessionId, text: "go", clientMessageId: "go" }).then(
          () => "started",
          (err: { code?: string }) => err.code,
        );
      const first = send("s1");
      for (let i = 0; i < hops; i++) await Promise.resolve();
      const answers = await Promise.all([first, send("s2")]);
      expect(answers.sort(), `after ${hops} hops`).toEqual(["started", "too_many_agents"]);
      // before, both ran: the first's agent had been detached to make room for the second's, its
      // turn running where no cancel reached it (agent_not_live), and a prompt could begin another
      await expect.poll(() => ran).toHaveLength(1);
      const running = ran[0]!;
      expect(await host.call(ADMIN, "session.cancel", { sessionId: running }), `after ${hops} hops`).toEqual({
        cancelled: true,
      });
      expect(ran).toHaveLength(1);
    } finally {
      held.open();
      await host.shutdown();
      await store.close();
      dir.remove();
    }
  }
}, 60_000);
