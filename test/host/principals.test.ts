import { afterEach, describe, expect, test, vi } from "vitest";
import {
  type CallMethod,
  METHOD_NAMES,
  Methods,
  type Notification,
  type ParamsOf,
} from "../../protocol/index.js";
import type { ControlDelta } from "../../src/host/live/live-state.js";
import { ADMIN, type Principal } from "../../src/host/principal.js";
import { readWholeLog } from "../support/whole-log.js";
import { errorCode, type HostFixture, openHost } from "./host-fixture.js";

const alice: Principal = { name: "alice", admin: false };
const bob: Principal = { name: "bob", admin: false };
const A = "alices";

let fx: HostFixture;
afterEach(async () => fx?.dispose());

/** Every method that names a session, pointed at alice's session. */
const aimedAtAlice: { [M in CallMethod]?: ParamsOf<M> } = {
  "session.page": { sessionId: A },
  "session.attachment": { sessionId: A, attachmentId: "x" },
  "session.fork": { sourceId: A, sessionId: "bobs-copy" },
  "session.prompt": { sessionId: A, text: "mine now", clientMessageId: "alice-1" },
  "session.rename": { sessionId: A, title: "bob was here" },
  "session.selectModel": { sessionId: A, model: "demo-careful" },
  "session.cancel": { sessionId: A },
  "session.updateQueue": { sessionId: A, op: { clear: true } },
  "session.ack": { sessionId: A, completionSettledAt: 0 },
  "session.clear": { sessionId: A },
  "session.dismiss": { sessionId: A },
  "session.restore": { sessionId: A },
  "session.delete": { sessionId: A },
};

describe("principals", () => {
  test("bob gets session_not_found for every method aimed at alice's live session, and changes nothing", async () => {
    fx = await openHost();
    await fx.host.call(alice, "session.create", { sessionId: A });
    const first = await fx.host.call(alice, "session.prompt", {
      sessionId: A,
      text: "/approve launch",
      clientMessageId: "alice-1",
    });
    await vi.waitFor(async () => expect((await fx.store.projection(A))?.lastState).toBe("input-required"));
    const before = await readWholeLog(fx.store, A);
    const namesASession = (m: CallMethod) => {
      const properties = (Methods[m].params as { properties?: object }).properties ?? {};
      return "sessionId" in properties || "sourceId" in properties;
    };
    const sessionMethods = METHOD_NAMES.filter(
      (m): m is CallMethod => Methods[m].kind === "call" && namesASession(m as CallMethod),
    );
    // the table above covers every method whose params name a session
    expect(sessionMethods.filter((m) => m !== "session.create").sort()).toEqual(
      Object.keys(aimedAtAlice).sort(),
    );
    for (const [method, params] of Object.entries(aimedAtAlice)) {
      const outcome = await errorCode(() => fx.host.call(bob, method as CallMethod, params as never));
      expect({ method, code: outcome.code }).toEqual({ method, code: "session_not_found" });
    }
    const [pending] = fx.host.live.interactions();
    const respond = await errorCode(() =>
      fx.host.call(bob, "session.respond", {
        interactionId: pending!.interactionId,
        response: { outcome: "approve" },
      }),
    );
    expect(respond.code).toBe("interaction_not_found");
    // alice's prompt key did not leak its answer to bob, and nothing was written
    expect(await readWholeLog(fx.store, A)).toEqual(before);
    expect(
      await fx.host.call(alice, "session.prompt", {
        sessionId: A,
        text: "again",
        clientMessageId: "alice-1",
      }),
    ).toEqual(first);
    const authorize = await errorCode(() => fx.host.authorizeRead(bob, A));
    expect(authorize.code).toBe("session_not_found");
  });

  test("a foreign session reads exactly like a missing one", async () => {
    fx = await openHost();
    await fx.host.call(alice, "session.create", { sessionId: A });
    const foreign = await errorCode(() => fx.host.call(bob, "session.page", { sessionId: A }));
    const missing = await errorCode(() => fx.host.call(bob, "session.page", { sessionId: "never-existed" }));
    expect(foreign.code).toBe(missing.code);
    expect(foreign.data).toEqual({ sessionId: A });
    expect(missing.data).toEqual({ sessionId: "never-existed" });
  });

  test("list, search, notifications and control show each principal only their sessions; admin sees all", async () => {
    fx = await openHost();
    const seen: Record<string, Notification[]> = { alice: [], bob: [], admin: [] };
    const deltas: Record<string, ControlDelta[]> = { alice: [], bob: [], admin: [] };
    for (const p of [alice, bob, ADMIN]) {
      fx.host.subscribeNotifications(p, (n) => seen[p.name]!.push(n));
      fx.host.subscribeControl(p, (d) => deltas[p.name]!.push(d));
    }
    await fx.host.call(alice, "session.create", { sessionId: A });
    await fx.host.call(bob, "session.create", { sessionId: "bobs" });
    const r = await fx.host.call(alice, "session.prompt", {
      sessionId: A,
      text: "searchable words",
      clientMessageId: "1",
    });
    await vi.waitFor(() => expect(fx.host.live.isRunning(A)).toBe(false));
    expect(r.queued).toBe(false);

    expect((await fx.host.call(bob, "session.list", {})).sessions.map((s) => s.sessionId)).toEqual(["bobs"]);
    expect((await fx.host.call(alice, "session.list", {})).sessions.map((s) => s.sessionId)).toEqual([A]);
    expect((await fx.host.call(ADMIN, "session.list", {})).sessions.map((s) => s.sessionId).sort()).toEqual(
      [A, "bobs"].sort(),
    );
    expect((await fx.host.call(bob, "session.search", { query: "searchable" })).hits).toEqual([]);
    const aliceHits = (await fx.host.call(alice, "session.search", { query: "searchable" })).hits;
    expect(new Set(aliceHits.map((h) => h.sessionId))).toEqual(new Set([A]));

    const sessionsIn = (ns: Notification[]) =>
      new Set(ns.map((n) => ("row" in n.value ? n.value.row.sessionId : n.value.sessionId)));
    expect(sessionsIn(seen.bob!)).toEqual(new Set(["bobs"]));
    expect(sessionsIn(seen.alice!)).toEqual(new Set([A]));
    expect(sessionsIn(seen.admin!)).toEqual(new Set([A, "bobs"]));
    const deltaSessions = (ds: ControlDelta[]) =>
      new Set(ds.map((d) => ("sessionId" in d ? d.sessionId : "?")));
    expect(deltaSessions(deltas.bob!)).toEqual(new Set(["bobs"]));
    expect(deltaSessions(deltas.alice!)).toEqual(new Set([A]));

    const bobBaseline = await fx.host.controlBaseline(bob);
    expect(bobBaseline.agents.map((a) => a.sessionId)).toEqual(["bobs"]);
    expect(bobBaseline.projections.map((p) => p.sessionId)).toEqual(["bobs"]);
  });
});
