import { afterEach, describe, expect, it, vi } from "vitest";
import { type CallMethod, SessionmuxError } from "../../protocol/index.js";
import { CallRouter, type LocalRun } from "../../src/host/call-router.js";
import { HostLeases } from "../../src/host/host-leases.js";
import { NotOwner } from "../../src/host/not-owner.js";
import { ADMIN, type Principal } from "../../src/host/principal.js";
import type { ForwardedCall } from "../../src/store/call-inbox.js";
import type { SessionLease } from "../../src/store/session-lease.js";
import { capturedLogger } from "../support/log-capture.js";
import { withMembers } from "../support/with-members.js";
import { errorCode, type HostFixture, openHost } from "./host-fixture.js";
import { ScriptedInbox } from "./scripted-inbox.js";

/**
 * Where a call runs when several hosts share a store: the router of host A, on a real SQLite
 * store (its leases, its interactions), with another host's lease taken in that store as host B
 * would take it; the inbox between hosts answers as each test scripts it (the inboxes themselves
 * are proven in the store tests and the multi-host tests).
 */

const HOST = "host-a";
const OTHER = "host-b";
const ALICE: Principal = { name: "alice", admin: false };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Ran {
  principal: Principal;
  method: CallMethod;
  params: unknown;
}

let fx: HostFixture | undefined;
afterEach(async () => {
  await fx?.dispose();
  fx = undefined;
});

async function routerOn(
  options: {
    forwardTimeoutMs?: number;
    run?: (ran: Ran) => Promise<unknown>;
    /** Runs after each read of a session's lease holder, before the router has its answer. */
    afterHolderRead?: (sessionId: string) => Promise<void>;
  } = {},
) {
  fx = await openHost();
  const store = fx.store;
  const log = capturedLogger();
  const leases = new HostLeases({ store, hostId: HOST, logger: log.logger, onLost: () => undefined });
  const inbox = new ScriptedInbox();
  const ran: Ran[] = [];
  let closing = false;
  let holderReads = 0;
  const leaseStore = withMembers(store, {
    leaseHolder: async (sessionId) => {
      holderReads++;
      const holder = await store.leaseHolder(sessionId);
      await options.afterHolderRead?.(sessionId);
      return holder;
    },
  });
  const run: LocalRun = async (principal, method, params) => {
    const call = { principal, method, params };
    ran.push(call);
    return options.run ? options.run(call) : { ranOn: HOST, method };
  };
  const forwarded: string[] = [];
  const router = new CallRouter({
    hostId: HOST,
    store,
    leaseStore,
    leases,
    inbox,
    run,
    meters: { callForwarded: (outcome) => forwarded.push(outcome) },
    logger: log.logger,
    closing: () => closing,
    ...(options.forwardTimeoutMs !== undefined ? { forwardTimeoutMs: options.forwardTimeoutMs } : {}),
  });
  const create = (sessionId: string) => fx!.host.call(ADMIN, "session.create", { sessionId });
  /** Host B takes the session's lease in the shared store. */
  const heldElsewhere = async (sessionId: string): Promise<SessionLease> => {
    const taken = await store.acquireLease(sessionId, OTHER, 60_000);
    if (taken.status !== "acquired") throw new Error(`lease: ${taken.status}`);
    return taken.lease;
  };
  return {
    store,
    router,
    leases,
    inbox,
    ran,
    log,
    forwarded,
    create,
    heldElsewhere,
    holderReads: () => holderReads,
    close: () => {
      closing = true;
    },
  };
}

describe("calls routed to the host that runs the session's agent", () => {
  it("a call for a session another host holds goes to that host through the inbox, as the same principal; its result is the answer", async () => {
    const r = await routerOn();
    await r.create("s1");
    await r.heldElsewhere("s1");
    r.inbox.answers = [
      { status: "ok", result: { turnId: "t-1" } },
      { status: "ok", result: { turnId: "t-2" } },
    ];
    const params = { sessionId: "s1", text: "hello", clientMessageId: "m1" };
    const principal = { ...ALICE, token: "never sent" } as Principal;
    expect(await r.router.call(principal, "session.prompt", params)).toEqual({ turnId: "t-1" });
    expect(await r.router.call(ALICE, "session.cancel", { sessionId: "s1" })).toEqual({ turnId: "t-2" });
    expect(r.ran).toEqual([]);
    expect(r.inbox.sent).toEqual([
      {
        target: OTHER,
        timeoutMs: 5_000,
        call: {
          callId: expect.stringMatching(UUID),
          fromHost: HOST,
          sessionId: "s1",
          principal: { name: "alice", admin: false },
          method: "session.prompt",
          params,
        },
      },
      {
        target: OTHER,
        timeoutMs: 5_000,
        call: expect.objectContaining({ method: "session.cancel", params: { sessionId: "s1" } }),
      },
    ]);
    // each call is its own record in the inbox, answered once
    expect(r.inbox.sent[0]!.call.callId).not.toBe(r.inbox.sent[1]!.call.callId);
  });

  it("a forwarded call waits as long as the host was configured to", async () => {
    const r = await routerOn({ forwardTimeoutMs: 1_234 });
    await r.create("s1");
    await r.heldElsewhere("s1");
    r.inbox.answers = [{ status: "ok", result: {} }];
    await r.router.call(ADMIN, "session.selectModel", { sessionId: "s1", model: "demo" });
    expect(r.inbox.sent.map((s) => s.timeoutMs)).toEqual([1_234]);
  });

  it("runs here when this host holds the lease (without asking the store), when nobody does, and when the store names this host", async () => {
    const r = await routerOn();
    for (const id of ["held-here", "free", "named-here"]) await r.create(id);
    expect((await r.leases.acquire("held-here")).status).toBe("acquired");
    // a lease of this host the router's lease set does not know (taken before a restart)
    expect((await r.store.acquireLease("named-here", HOST, 60_000)).status).toBe("acquired");

    await r.router.call(ALICE, "session.prompt", { sessionId: "held-here", text: "a" });
    expect(r.holderReads()).toBe(0);
    await r.router.call(ALICE, "session.prompt", { sessionId: "free", text: "b" });
    await r.router.call(ALICE, "session.prompt", { sessionId: "named-here", text: "c" });
    expect(r.holderReads()).toBe(2);
    expect(r.ran.map((call) => (call.params as { sessionId: string }).sessionId)).toEqual([
      "held-here",
      "free",
      "named-here",
    ]);
    expect(r.ran[0]).toEqual({
      principal: ALICE,
      method: "session.prompt",
      params: { sessionId: "held-here", text: "a" },
    });
    expect(r.inbox.sent).toEqual([]);
  });

  it("calls that never act on an agent, and create and fork, run here whoever holds the session", async () => {
    const r = await routerOn();
    await r.create("s1");
    await r.heldElsewhere("s1");
    const calls: [CallMethod, unknown][] = [
      ["session.fork", { sessionId: "s1", newSessionId: "s2" }],
      ["session.create", { sessionId: "s1" }],
      ["session.rename", { sessionId: "s1", title: "renamed" }],
      ["session.dismiss", { sessionId: "s1" }],
      ["session.list", {}],
    ];
    for (const [method, params] of calls)
      expect(await r.router.call(ALICE, method, params)).toEqual({ ranOn: HOST, method });
    expect(r.ran.map((call) => call.method)).toEqual(calls.map(([method]) => method));
    expect(r.inbox.sent).toEqual([]);
    expect(r.holderReads()).toBe(0);
  });

  it("a call naming no session runs here", async () => {
    const r = await routerOn();
    await r.router.call(ALICE, "session.prompt", { text: "no session" });
    await r.router.call(ALICE, "session.cancel", { sessionId: 42 });
    expect(r.ran.map((call) => call.method)).toEqual(["session.prompt", "session.cancel"]);
    expect(r.holderReads()).toBe(0);
  });

  it("an answer goes to the host holding its interaction's session; an unknown interaction runs here", async () => {
    const r = await routerOn();
    await r.create("asks");
    const { turnId } = await fx!.host.call(ADMIN, "session.prompt", {
      sessionId: "asks",
      text: "/ask which region?",
      clientMessageId: "q",
    });
    const interaction = await vi.waitFor(async () => {
      const stored = fx!.host.live.interactions().find((i) => i.turnId === turnId);
      expect(stored).toBeDefined();
      expect(await r.store.interaction(stored!.interactionId)).not.toBeNull();
      return stored!;
    });
    await r.heldElsewhere("asks");
    r.inbox.answers = [{ status: "ok", result: { resolved: true } }];
    const answer = { interactionId: interaction.interactionId, response: { answer: "north" } };
    expect(await r.router.call(ADMIN, "session.respond", answer)).toEqual({ resolved: true });
    expect(r.inbox.sent.map((s) => [s.target, s.call.sessionId, s.call.params])).toEqual([
      [OTHER, "asks", answer],
    ]);

    await r.router.call(ADMIN, "session.respond", { interactionId: "unknown", response: { answer: "x" } });
    await r.router.call(ADMIN, "session.respond", { interactionId: 7, response: { answer: "x" } });
    expect(r.ran.map((call) => (call.params as { interactionId: unknown }).interactionId)).toEqual([
      "unknown",
      7,
    ]);
    expect(r.inbox.sent).toHaveLength(1);
  });

  it("the owner's typed error is the client's, with its code, message and data; a code this host does not know is internal_error", async () => {
    const r = await routerOn();
    await r.create("s1");
    await r.heldElsewhere("s1");
    r.inbox.answers = [
      { status: "error", code: "queue_full", message: "the queue is full", data: { limit: 3 } },
      { status: "error", code: "a_code_from_a_newer_host", message: "something new" },
    ];
    const params = { sessionId: "s1", text: "hi" };
    const first = await r.router.call(ALICE, "session.prompt", params).catch((err: unknown) => err);
    expect(first).toBeInstanceOf(SessionmuxError);
    expect(first).toMatchObject({ code: "queue_full", message: "the queue is full", data: { limit: 3 } });
    const second = await r.router.call(ALICE, "session.prompt", params).catch((err: unknown) => err);
    expect(second).toBeInstanceOf(SessionmuxError);
    expect(second).toMatchObject({ code: "internal_error", message: "something new" });
    expect(r.inbox.sent).toHaveLength(2);
    expect(r.ran).toEqual([]);
  });

  it("an owner that does not answer or no longer holds the session is resolved again, four times at most, then overloaded", async () => {
    const r = await routerOn();
    await r.create("s1");
    await r.heldElsewhere("s1");
    r.inbox.answers = [{ status: "not_owner" }];
    const err = await r.router.call(ALICE, "session.cancel", { sessionId: "s1" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SessionmuxError);
    expect(err).toMatchObject({
      code: "overloaded",
      message: "the host running this session's agent did not answer; retry shortly",
      data: { method: "session.cancel" },
    });
    expect(r.inbox.sent.map((s) => s.target)).toEqual([OTHER, OTHER, OTHER, OTHER]);
    expect(r.holderReads()).toBe(4);
    expect(r.ran).toEqual([]);
    const notServed = r.log.lines.filter((line) => line.msg === "forwarded call not served");
    expect(notServed.map((line) => line.status)).toEqual(["not_owner", "timeout", "timeout", "timeout"]);
    expect(notServed[0]).toMatchObject({ sessionId: "s1", target: OTHER, method: "session.cancel" });
    expect(r.forwarded).toEqual(["not_owner", "timeout", "timeout", "timeout"]);
  });

  it("an owner that took the call and had not begun it at the longest wait: overloaded, retryable, sent nowhere else", async () => {
    const r = await routerOn();
    await r.create("s1");
    await r.heldElsewhere("s1");
    // taken back unrun from an owner still holding the session: routed again, it would queue there anew
    r.inbox.answers = [{ status: "not_begun" }, { status: "ok", result: "routed again" }];
    const err = await r.router.call(ALICE, "session.cancel", { sessionId: "s1" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SessionmuxError);
    expect(err).toMatchObject({ code: "overloaded", retryable: true, data: { method: "session.cancel" } });
    expect(r.inbox.sent).toHaveLength(1);
    expect(r.ran).toEqual([]);
    expect(r.forwarded).toEqual(["not_begun"]);
  });

  it("every route of one call tells the inbox when the call's wait began: the longest wait on a claimed call counts from its first route", async () => {
    const r = await routerOn();
    await r.create("s1");
    await r.heldElsewhere("s1");
    r.inbox.answers = [{ status: "timeout" }, { status: "not_owner" }, { status: "ok", result: "third" }];
    const before = Date.now();
    expect(await r.router.call(ALICE, "session.cancel", { sessionId: "s1" })).toBe("third");
    const [first, ...later] = r.inbox.waitingSince;
    // before: none, so each route waited on a claimed call its own longest wait, from its own send
    expect(first).toBeGreaterThanOrEqual(before);
    expect(later).toEqual([first, first]);
  });

  it("an owner that took the call and lost the session before answering: outcome_unknown at once, not retryable, sent nowhere else", async () => {
    const r = await routerOn();
    await r.create("s1");
    const elsewhere = await r.heldElsewhere("s1");
    // the owner let the session go meanwhile: sent again, the call would now run here
    r.inbox.meanwhile = () => r.store.releaseLease(elsewhere);
    r.inbox.answers = [{ status: "unknown" }];
    const err = await r.router.call(ALICE, "session.cancel", { sessionId: "s1" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SessionmuxError);
    expect(err).toMatchObject({
      code: "outcome_unknown",
      retryable: false,
      message: expect.stringContaining("whether the call took effect is unknown"),
      data: { method: "session.cancel", outcome: "unknown" },
    });
    expect(r.inbox.sent).toHaveLength(1);
    expect(r.ran).toEqual([]);
    expect(r.forwarded).toEqual(["unknown"]);
  });

  it("a call the owner took as this host closes under it: outcome_unknown naming the shutdown, sent nowhere else", async () => {
    const r = await routerOn();
    await r.create("s1");
    await r.heldElsewhere("s1");
    // this host closes while the owner runs the call: its inbox cannot wait for the reply
    r.inbox.meanwhile = async () => r.close();
    r.inbox.answers = [{ status: "unknown" }];
    const err = await r.router.call(ALICE, "session.cancel", { sessionId: "s1" }).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "outcome_unknown",
      retryable: false,
      message:
        "this host shut down while the host running this session's agent held this call: whether the call took effect is unknown; check the session, then send it again if it did not (a prompt sent again with its clientMessageId runs at most once)",
      data: { method: "session.cancel", outcome: "unknown" },
    });
    expect(r.inbox.sent).toHaveLength(1);
    expect(r.ran).toEqual([]);
  });

  it("a call taken back unrun as this host closes is answered host_shutting_down: routed no more, run nowhere", async () => {
    const r = await routerOn();
    await r.create("s1");
    const elsewhere = await r.heldElsewhere("s1");
    // the owner let the session go too: resolved again, the call would run on this closing host
    r.inbox.meanwhile = async () => {
      r.close();
      await r.store.releaseLease(elsewhere);
    };
    const err = await r.router.call(ALICE, "session.cancel", { sessionId: "s1" }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "host_shutting_down", retryable: true });
    expect(r.inbox.sent).toHaveLength(1);
    expect(r.ran).toEqual([]);
    expect(r.forwarded).toEqual(["timeout"]);
  });

  it("a forward the store failed under is the caller's answer as it is, sent nowhere else, and counted unknown or not_recorded", async () => {
    const r = await routerOn();
    await r.create("s1");
    await r.heldElsewhere("s1");
    const maybeRecorded = new SessionmuxError("outcome_unknown", "the connection was lost", {
      data: { method: "session.cancel", outcome: "unknown" },
    });
    const notRecorded = new SessionmuxError("persistence_failure", "no connection");
    r.inbox.failures = [maybeRecorded, notRecorded];
    const first = await r.router.call(ALICE, "session.cancel", { sessionId: "s1" }).catch((e: unknown) => e);
    const second = await r.router.call(ALICE, "session.cancel", { sessionId: "s1" }).catch((e: unknown) => e);
    expect([first, second]).toEqual([maybeRecorded, notRecorded]);
    expect(r.inbox.sent).toHaveLength(2);
    expect(r.ran).toEqual([]);
    expect(r.forwarded).toEqual(["unknown", "not_recorded"]);
  });

  it("an owner that let the session go while the call waited: the next resolution runs it here", async () => {
    const r = await routerOn();
    await r.create("s1");
    const elsewhere = await r.heldElsewhere("s1");
    r.inbox.meanwhile = () => r.store.releaseLease(elsewhere);
    expect(await r.router.call(ALICE, "session.cancel", { sessionId: "s1" })).toEqual({
      ranOn: HOST,
      method: "session.cancel",
    });
    expect(r.inbox.sent).toHaveLength(1);
    expect(r.ran).toHaveLength(1);
  });

  it("a release heard while the owner was read takes the call back from the owner it read, at once, and runs it here", async () => {
    let release: (() => Promise<void>) | undefined;
    const r = await routerOn({
      forwardTimeoutMs: 600_000,
      afterHolderRead: async () => {
        // the first read saw host B's lease; its release commits and is heard before the read returns
        const releasing = release;
        release = undefined;
        await releasing?.();
      },
    });
    await r.create("s1");
    const elsewhere = await r.heldElsewhere("s1");
    release = async () => {
      await r.store.releaseLease(elsewhere);
      r.router.leaseChanged("s1");
    };
    r.inbox.untilWithdrawn = true;

    expect(await r.router.call(ALICE, "session.cancel", { sessionId: "s1" })).toEqual({
      ranOn: HOST,
      method: "session.cancel",
    });
    expect(r.inbox.sent).toHaveLength(1);
    expect(r.forwarded).toEqual(["withdrawn"]);
  }, 20_000);

  it("a local run that finds another host took the session resolves the owner again and forwards; other failures are the answer", async () => {
    let takeItFirst = true;
    const r = await routerOn({
      run: async () => {
        if (takeItFirst) {
          takeItFirst = false;
          await r.heldElsewhere("s1");
          throw new NotOwner("s1", OTHER);
        }
        throw new SessionmuxError("session_not_found", "no such session");
      },
    });
    await r.create("s1");
    r.inbox.answers = [{ status: "ok", result: { forwarded: true } }];
    expect(await r.router.call(ALICE, "session.cancel", { sessionId: "s1" })).toEqual({ forwarded: true });
    expect(r.ran).toHaveLength(1);
    expect(r.inbox.sent.map((s) => s.target)).toEqual([OTHER]);

    // a failure other than NotOwner is not retried
    expect(await errorCode(() => r.router.call(ALICE, "session.cancel", { sessionId: "free" }))).toEqual({
      code: "session_not_found",
      data: undefined,
    });
    expect(r.ran).toHaveLength(2);
  });

  it("a local run that keeps finding the session taken ends overloaded after four tries", async () => {
    const r = await routerOn({
      run: async () => {
        throw new NotOwner("s1", null);
      },
    });
    await r.create("s1");
    expect((await errorCode(() => r.router.call(ALICE, "session.cancel", { sessionId: "s1" }))).code).toBe(
      "overloaded",
    );
    expect(r.ran).toHaveLength(4);
    expect(r.inbox.sent).toEqual([]);
  });
});

describe("calls served for another host", () => {
  const forwarded = (overrides: Partial<ForwardedCall> = {}): ForwardedCall => ({
    callId: "c-1",
    fromHost: OTHER,
    sessionId: "s1",
    principal: { name: "alice", admin: false },
    method: "session.cancel",
    params: { sessionId: "s1" },
    ...overrides,
  });

  it("runs a call only while this host holds the session's lease and is not closing, as the sender's principal", async () => {
    const r = await routerOn({ run: async () => ({ cancelled: true }) });
    await r.create("s1");
    expect(await r.router.serve(forwarded())).toEqual({ status: "not_owner" });
    expect(r.ran).toEqual([]);
    await r.leases.acquire("s1");
    expect(await r.router.serve(forwarded())).toEqual({ status: "ok", result: { cancelled: true } });
    expect(r.ran).toEqual([
      { principal: { name: "alice", admin: false }, method: "session.cancel", params: { sessionId: "s1" } },
    ]);
    r.close();
    expect(await r.router.serve(forwarded())).toEqual({ status: "not_owner" });
    expect(r.ran).toHaveLength(1);
  });

  it("a method that is not a call is unknown; params are checked as the mux checks a client's", async () => {
    const r = await routerOn();
    await r.create("s1");
    await r.leases.acquire("s1");
    expect(await r.router.serve(forwarded({ method: "session.follow" }))).toEqual({
      status: "error",
      code: "unknown_method",
      message: "unknown method session.follow",
    });
    expect(await r.router.serve(forwarded({ method: "session.nope" }))).toMatchObject({
      status: "error",
      code: "unknown_method",
    });
    expect(await r.router.serve(forwarded({ params: { sessionId: "s1", extra: 1 } }))).toMatchObject({
      status: "error",
      code: "bad_request",
    });
    expect(r.ran).toEqual([]);
  });

  it("the outcome goes back: a typed error with its data (none when it has none), not_owner for a lost session, internal_error for any other fault, logged", async () => {
    const failures: unknown[] = [
      new SessionmuxError("queue_full", "the queue is full", { data: { limit: 3 } }),
      new SessionmuxError("agent_not_live", "no agent"),
      new NotOwner("s1", null),
      new TypeError("a bug"),
    ];
    const r = await routerOn({
      run: async () => {
        throw failures.shift();
      },
    });
    await r.create("s1");
    await r.leases.acquire("s1");
    const replies = [];
    for (let i = 0; i < 4; i++) replies.push(await r.router.serve(forwarded()));
    expect(replies).toEqual([
      { status: "error", code: "queue_full", message: "the queue is full", data: { limit: 3 } },
      { status: "error", code: "agent_not_live", message: "no agent" },
      { status: "not_owner" },
      { status: "error", code: "internal_error", message: "internal error" },
    ]);
    expect(Object.hasOwn(replies[1]!, "data")).toBe(false);
    const logged = r.log.lines.filter((line) => line.msg === "a forwarded call failed");
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ method: "session.cancel", sessionId: "s1", err: { message: "a bug" } });
  });
});
