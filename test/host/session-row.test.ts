import { afterEach, describe, expect, it, vi } from "vitest";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost } from "./host-fixture.js";

/** A session's row in the list: `live` while an agent is attached, `running` while a turn is open. */

let fx: HostFixture | undefined;
afterEach(async () => {
  await fx?.dispose();
  fx = undefined;
});

const rowOf = async (sessionId: string) => {
  const { sessions } = await fx!.host.call(ADMIN, "session.list", {});
  const row = sessions.find((s) => s.sessionId === sessionId);
  if (!row) throw new Error(`${sessionId} not listed`);
  return { live: row.live, running: row.running };
};

describe("a session's row", () => {
  it("is live only while an agent is attached, and running only while its turn is open", async () => {
    fx = await openHost({ idleDetachMs: 100 });
    await fx.store.create({ sessionId: "cold", owner: "admin", model: "demo-fast" });
    expect(await rowOf("cold")).toEqual({ live: false, running: false });

    await fx.host.call(ADMIN, "session.create", { sessionId: "s1" });
    await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "s1",
      text: "/sleep 300",
      clientMessageId: "m1",
    });
    await vi.waitFor(async () => expect(await rowOf("s1")).toEqual({ live: true, running: true }));
    await vi.waitFor(async () => expect(await rowOf("s1")).toEqual({ live: true, running: false }));
    // detached after 100 ms idle
    await vi.waitFor(async () => expect(await rowOf("s1")).toEqual({ live: false, running: false }), {
      timeout: 5_000,
    });
    expect(await rowOf("cold")).toEqual({ live: false, running: false });
  });
});
