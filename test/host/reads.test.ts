import { afterEach, describe, expect, test, vi } from "vitest";
import { ADMIN } from "../../src/host/principal.js";
import { errorCode, type HostFixture, openHost, readLog } from "./host-fixture.js";

/** protocol-v1 §4 cold reads through the host, as a client calls them. */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

describe("session.list", () => {
  test("pages newest first: a full page carries next, the last page none", async () => {
    fx = await openHost();
    for (const [i, sessionId] of ["old", "mid", "new"].entries()) {
      await fx.store.create({ sessionId, owner: "admin", model: "demo-fast", at: 1_000 * (i + 1) });
    }
    const first = await fx.host.call(ADMIN, "session.list", { limit: 2 });
    expect(first.sessions.map((s) => s.sessionId)).toEqual(["new", "mid"]);
    expect(first.next).toEqual(expect.any(String));
    const rest = await fx.host.call(ADMIN, "session.list", { limit: 2, before: first.next! });
    expect(rest.sessions.map((s) => s.sessionId)).toEqual(["old"]);
    expect("next" in rest).toBe(false);
  });

  test("parked: true lists only sessions whose newest turn waits on the operator", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: "plain" });
    await fx.host.call(ADMIN, "session.create", { sessionId: "asking" });
    await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "asking",
      text: "/ask ok?",
      clientMessageId: "q",
    });
    await vi.waitFor(async () =>
      expect((await fx.store.projection("asking"))?.lastState).toBe("input-required"),
    );
    const parked = await fx.host.call(ADMIN, "session.list", { parked: true });
    expect(parked.sessions.map((s) => s.sessionId)).toEqual(["asking"]);
    const all = await fx.host.call(ADMIN, "session.list", {});
    expect(all.sessions.map((s) => s.sessionId).sort()).toEqual(["asking", "plain"]);
  });
});

describe("session.page", () => {
  async function sessionWithEvents(): Promise<number[]> {
    await fx.host.call(ADMIN, "session.create", { sessionId: "s" });
    for (let i = 0; i < 3; i++)
      await fx.host.call(ADMIN, "session.rename", { sessionId: "s", title: `t${i}` });
    return (await readLog(fx.store, "s")).map((e) => e.seq);
  }

  test("beforeSeq reads the events before it, afterSeq those after it; both at once is bad_request", async () => {
    fx = await openHost();
    const seqs = await sessionWithEvents();
    expect(seqs).toEqual([1, 2, 3, 4]);
    const before = await fx.host.call(ADMIN, "session.page", { sessionId: "s", beforeSeq: 3 });
    expect(before.events.map((e) => e.seq)).toEqual([1, 2]);
    const after = await fx.host.call(ADMIN, "session.page", { sessionId: "s", afterSeq: 2 });
    expect(after.events.map((e) => e.seq)).toEqual([3, 4]);
    expect(
      await errorCode(() =>
        fx.host.call(ADMIN, "session.page", { sessionId: "s", afterSeq: 1, beforeSeq: 3 }),
      ),
    ).toEqual({ code: "bad_request", data: { field: "/beforeSeq" } });
  });

  test("a session deleted between the check and the read is session_retired", async () => {
    fx = await openHost();
    await sessionWithEvents();
    const page = fx.store.page.bind(fx.store);
    vi.spyOn(fx.store, "page").mockImplementationOnce(async (sessionId, query) => {
      expect((await fx.store.delete(sessionId)).status).toBe("deleted");
      return page(sessionId, query);
    });
    expect(await errorCode(() => fx.host.call(ADMIN, "session.page", { sessionId: "s" }))).toEqual({
      code: "session_retired",
      data: { sessionId: "s" },
    });
  });
});

describe("session.attachment", () => {
  test("an id that names no attachment of the session is attachment_not_found, naming it", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: "s" });
    expect(
      await errorCode(() =>
        fx.host.call(ADMIN, "session.attachment", { sessionId: "s", attachmentId: "none" }),
      ),
    ).toEqual({ code: "attachment_not_found", data: { attachmentId: "none" } });
  });
});
