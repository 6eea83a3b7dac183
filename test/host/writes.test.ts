import { afterEach, describe, expect, test, vi } from "vitest";
import { ADMIN } from "../../src/host/principal.js";
import { errorCode, type HostFixture, openHost, readLog, turnEvents } from "./host-fixture.js";

/** protocol-v1 §4 cold writes through the host: `session.rename`, `session.selectModel`, `session.ack`. */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "written";

describe("session.rename and session.selectModel", () => {
  test("answer the seq of the event they append, stamped with the host's clock", async () => {
    fx = await openHost({ now: () => 1_700_000_000_000 });
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const renamed = await fx.host.call(ADMIN, "session.rename", { sessionId: S, title: "New title" });
    const models = await fx.host.call(ADMIN, "session.models", {});
    const other = models.models.find((m) => m.id !== models.default)!.id;
    const selected = await fx.host.call(ADMIN, "session.selectModel", { sessionId: S, model: other });
    const log = await readLog(fx.store, S);
    expect(log.find((e) => e.seq === renamed.seq)).toMatchObject({
      type: "session/renamed",
      data: { title: "New title" },
      at: 1_700_000_000_000,
    });
    expect(log.find((e) => e.seq === selected.seq)).toMatchObject({
      type: "session/model",
      data: { model: other },
      at: 1_700_000_000_000,
    });
    expect(selected.seq).toBe(renamed.seq + 1);
  });

  test("a rename whose session is deleted between the check and the write is session_retired", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const append = fx.store.append.bind(fx.store);
    vi.spyOn(fx.store, "append").mockImplementationOnce(async (sessionId, events, options) => {
      expect((await fx.store.delete(sessionId)).status).toBe("deleted");
      return append(sessionId, events, options);
    });
    expect(
      await errorCode(() => fx.host.call(ADMIN, "session.rename", { sessionId: S, title: "late" })),
    ).toEqual({
      code: "session_retired",
      data: { sessionId: S },
    });
  });
});

describe("session.ack", () => {
  test("answers whether a completion is still unseen: a stale time keeps it, its settle time clears it", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "hi", clientMessageId: "m" });
    await turnEvents(fx.store, S, r.turnId!);
    const settled = await vi.waitFor(async () => {
      const projection = await fx.store.projection(S);
      expect(projection?.hasUnseenCompletion).toBe(true);
      return projection!.completionSettledAt!;
    });
    const ack = (completionSettledAt: number) =>
      fx.host.call(ADMIN, "session.ack", { sessionId: S, completionSettledAt });
    expect(await ack(settled - 1)).toEqual({ hasUnseenCompletion: true });
    expect(await ack(settled)).toEqual({ hasUnseenCompletion: false });
    expect((await fx.store.projection(S))?.hasUnseenCompletion).toBe(false);
  });

  test("an ack whose session is deleted between the check and the write is session_retired", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const ack = fx.store.ack.bind(fx.store);
    vi.spyOn(fx.store, "ack").mockImplementationOnce(async (sessionId, completionSettledAt) => {
      expect((await fx.store.delete(sessionId)).status).toBe("deleted");
      return ack(sessionId, completionSettledAt);
    });
    expect(
      await errorCode(() => fx.host.call(ADMIN, "session.ack", { sessionId: S, completionSettledAt: 1 })),
    ).toEqual({ code: "session_retired", data: { sessionId: S } });
  });
});
