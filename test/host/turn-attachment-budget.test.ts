import { afterEach, describe, expect, test, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import type { AgentDriver } from "../../src/agents/agent.js";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { heldWhenRefused, TurnAttachmentBudget } from "../../src/host/turn-attachment-budget.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { settledHeldBytes } from "../support/held-bytes.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { capturedLogger } from "../support/log-capture.js";
import { MuxPeer } from "../support/mux-peer.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";

// A queued start refused by the store is tried again only after a pause far longer than any wait
// here: a queued prompt refused for room must start when a turn gives room back, not on a timer.
vi.mock("../../src/host/store-retry.js", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../../src/host/store-retry.js")>()),
  storeRetryDelay: () => 600_000,
}));

/**
 * The attachment bytes one principal's running turns hold are bounded: each turn's agent receives
 * its prompt's uploads whole, and one upload may be named by prompts in any number of sessions.
 */

const KIB = 1024;
const MIB = 1024 * KIB;
let host: TestHost | undefined;
let peer: MuxPeer | undefined;

afterEach(async () => {
  await peer?.disconnect();
  await host?.dispose();
  peer = undefined;
  host = undefined;
});

/**
 * An agent whose turns hold their prompt (its attachments included) until the test finishes
 * them, they are stopped, or their text is "fail" (which throws at once). A finished turn takes
 * the prompts steered into it.
 */
function holdingAgent(): {
  agent: AgentDriver;
  started: string[];
  taken: string[];
  finish: (text: string) => void;
} {
  const started: string[] = [];
  const taken: string[] = [];
  const finishers = new Map<string, () => void>();
  const demo = new DemoAgent();
  const agent: AgentDriver = {
    name: "holding",
    defaultModel: demo.defaultModel,
    models: () => demo.models(),
    runTurn: async (turn) => {
      started.push(turn.prompt.text);
      if (turn.prompt.text === "fail") throw new Error("the model failed");
      await new Promise<void>((resolve) => {
        finishers.set(turn.prompt.text, resolve);
        turn.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      if (!turn.signal.aborted) taken.push(...(await turn.takeInterjections()));
      return { state: "completed" };
    },
  };
  return { agent, started, taken, finish: (text) => finishers.get(text)?.() };
}

async function open(options: { maxTurnAttachmentBytes?: number } = {}) {
  const holding = holdingAgent();
  const { logger, lines } = capturedLogger();
  host = await startTestHost({ agent: holding.agent, logger, ...options });
  peer = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
  return { ...holding, lines };
}

async function upload(bytes: number): Promise<string> {
  const res = await fetch(`${host!.url}/v1/attachments`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    body: new Uint8Array(bytes).fill(1),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { attachmentId: string }).attachmentId;
}

async function newSession(): Promise<string> {
  const { header } = await peer!.call<{ header: { sessionId: string } }>("session.create", {});
  return header.sessionId;
}

function named(ids: string[]) {
  return ids.map((attachmentId, i) => ({ name: `f${i}`, type: "application/octet-stream", attachmentId }));
}

function prompt(sessionId: string, text: string, ids: string[], clientMessageId = text) {
  return peer!.call<{ queued: boolean }>("session.prompt", {
    sessionId,
    text,
    clientMessageId,
    attachments: named(ids),
  });
}

async function refusal(call: Promise<unknown>): Promise<SessionmuxError> {
  return call.then(
    () => {
      throw new Error("the prompt was accepted");
    },
    (err: SessionmuxError) => err,
  );
}

const held = () => host!.host.heldAttachmentBytes("admin");

describe("attachment bytes held by a principal's running turns", () => {
  test("prompts naming 32 uploads of 2 MiB in 6 sessions hold one budget, not one per session", async () => {
    const { started } = await open();
    const ids: string[] = [];
    for (let i = 0; i < 32; i++) ids.push(await upload(2 * MIB - 1024));
    const sessions: string[] = [];
    for (let i = 0; i < 6; i++) sessions.push(await newSession());
    const before = await settledHeldBytes();
    const answers = await Promise.allSettled(sessions.map((s, i) => prompt(s, `p${i}`, ids)));
    const refused = answers.flatMap((a) => (a.status === "rejected" ? [a.reason as SessionmuxError] : []));
    // the host's memory after a full collection, the least of a few reads (a sweep frees late)
    let growth = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 3; i++) growth = Math.min(growth, (await settledHeldBytes(50)) - before);
    expect(started).toHaveLength(1);
    expect(refused.map((e) => e.code)).toEqual(Array(5).fill("overloaded"));
    expect(held()).toBe(32 * (2 * MIB - 1024));
    // one prompt's 64 MiB is held, not six (384 MiB before the bound)
    expect(growth).toBeLessThan(64 * MIB + 24 * MIB);
  }, 60_000);

  test("a prompt past the budget is refused overloaded, unwritten; one whose own pass it, payload_too_large", async () => {
    await open({ maxTurnAttachmentBytes: 4 * MIB });
    const [a, b, big] = [await upload(3 * MIB), await upload(2 * MIB), await upload(5 * MIB)];
    const [s1, s2, s3] = [await newSession(), await newSession(), await newSession()];
    expect(await prompt(s1, "hold", [a])).toMatchObject({ queued: false });
    const over = await refusal(prompt(s2, "over", [b]));
    expect(over.code).toBe("overloaded");
    expect(over.retryable).toBe(true);
    expect(over.data).toEqual({
      limit: "turn_attachment_bytes_per_principal",
      maxBytes: 4 * MIB,
      heldBytes: 3 * MIB,
      bytes: 2 * MIB,
    });
    const alone = await refusal(prompt(s3, "alone", [big]));
    expect(alone.code).toBe("payload_too_large");
    expect(alone.retryable).toBe(false);
    expect(alone.data).toEqual({ limit: "turn_attachment_bytes", maxBytes: 4 * MIB, bytes: 5 * MIB });
    // nothing of the refused prompts was written
    for (const sessionId of [s2, s3]) {
      const page = await peer!.call<{ events: { type: string }[] }>("session.page", { sessionId });
      expect(page.events.map((e) => e.type)).toEqual(["session/created"]);
    }
    expect(held()).toBe(3 * MIB);
  });

  test("the budget is given back when a turn ends: the refused prompt runs, a queued one starts", async () => {
    const { started, finish, lines } = await open({ maxTurnAttachmentBytes: 4 * MIB });
    const [a, b] = [await upload(3 * MIB), await upload(2 * MIB)];
    const [s1, s2] = [await newSession(), await newSession()];
    expect(await prompt(s1, "first", [a])).toMatchObject({ queued: false });
    expect((await refusal(prompt(s2, "again", [b]))).code).toBe("overloaded");
    finish("first");
    await until(() => held() === 0, 10_000, "the first turn's bytes given back");
    expect(await prompt(s2, "again", [b])).toMatchObject({ queued: false });
    expect(held()).toBe(2 * MIB);
    finish("again");
    await until(() => held() === 0, 10_000, "the second turn's bytes given back");

    // queued behind a turn without attachments, it waits for room rather than failing
    expect(await prompt(s1, "hold", [a])).toMatchObject({ queued: false });
    expect(await prompt(s2, "plain", [])).toMatchObject({ queued: false });
    expect(await prompt(s2, "queued", [b])).toMatchObject({ queued: true });
    finish("plain");
    await until(
      () => lines.some((l) => l.msg === "queued prompt could not start" && l.sessionId === s2),
      10_000,
      "the queued prompt refused for room",
    );
    expect(started).not.toContain("queued");
    finish("hold");
    await until(() => started.includes("queued"), 20_000, "the queued prompt started");
    expect(held()).toBe(2 * MIB);
  }, 30_000);

  test("queued prompts of two sessions waiting for room start one after another as turns end", async () => {
    const { started, finish } = await open({ maxTurnAttachmentBytes: 4 * MIB });
    const [a, b, c] = [await upload(3 * MIB), await upload(3 * MIB), await upload(3 * MIB)];
    const [s1, s2, s3] = [await newSession(), await newSession(), await newSession()];
    expect(await prompt(s1, "hold", [a])).toMatchObject({ queued: false });
    for (const [n, s, id] of [
      [2, s2, b],
      [3, s3, c],
    ] as const) {
      expect(await prompt(s, `plain-${n}`, [])).toMatchObject({ queued: false });
      expect(await prompt(s, `queued-${n}`, [id])).toMatchObject({ queued: true });
      finish(`plain-${n}`);
    }
    const queuedStarted = () => started.filter((t) => t.startsWith("queued"));
    await until(() => started.length === 3, 10_000, "the plain turns started");
    finish("hold");
    await until(() => queuedStarted().length === 1, 10_000, "one queued prompt started");
    // the other did not fit beside it, and waits for it to end
    expect(held()).toBe(3 * MIB);
    finish(queuedStarted()[0]!);
    await until(() => queuedStarted().length === 2, 10_000, "the other queued prompt started");
    expect(held()).toBe(3 * MIB);
  }, 30_000);

  test("a queued prompt waiting for room is no fault, but a store failure after it is still warned", async () => {
    const { started, finish, lines } = await open({ maxTurnAttachmentBytes: 4 * MIB });
    const [a, b] = [await upload(3 * MIB), await upload(2 * MIB)];
    const [s1, s2] = [await newSession(), await newSession()];
    expect(await prompt(s1, "hold", [a])).toMatchObject({ queued: false });
    expect(await prompt(s2, "plain", [])).toMatchObject({ queued: false });
    expect(await prompt(s2, "queued", [b])).toMatchObject({ queued: true });
    const notStarted = () =>
      lines.filter((l) => l.msg === "queued prompt could not start" && l.sessionId === s2);
    finish("plain");
    await until(() => notStarted().length === 1, 10_000, "the queued prompt refused for room");
    expect(notStarted()[0]!.level).toBe(20);
    // room comes back, and the store now refuses the start: the operator must hear of that
    vi.spyOn(host!.store, "append").mockRejectedValue(
      new SessionmuxError("persistence_failure", "disk full"),
    );
    finish("hold");
    await until(() => held() === 0, 10_000, "the first turn's bytes given back");
    await until(() => notStarted().length === 2, 10_000, "the queued prompt refused by the store");
    expect(notStarted()[1]!.err).toMatchObject({ code: "persistence_failure" });
    expect(notStarted()[1]!.level).toBe(40);
    expect(started).not.toContain("queued");
    vi.restoreAllMocks();
  }, 30_000);

  test("a turn that fails, is cancelled, deleted or stopped by shutdown gives its bytes back", async () => {
    const { started } = await open({ maxTurnAttachmentBytes: 4 * MIB });
    const a = await upload(3 * MIB);
    const [s1, s2, s3, s4] = [await newSession(), await newSession(), await newSession(), await newSession()];

    expect(await prompt(s1, "fail", [a])).toMatchObject({ queued: false });
    await until(() => held() === 0, 10_000, "the failed turn's bytes given back");

    expect(await prompt(s2, "cancelled", [a])).toMatchObject({ queued: false });
    expect(held()).toBe(3 * MIB);
    await peer!.call("session.cancel", { sessionId: s2 });
    await until(() => held() === 0, 10_000, "the cancelled turn's bytes given back");

    expect(await prompt(s3, "deleted", [a])).toMatchObject({ queued: false });
    expect(held()).toBe(3 * MIB);
    await peer!.call("session.delete", { sessionId: s3 });
    await until(() => held() === 0, 10_000, "the deleted session's bytes given back");

    expect(await prompt(s4, "stopped", [a])).toMatchObject({ queued: false });
    expect(held()).toBe(3 * MIB);
    expect(started).toEqual(["fail", "cancelled", "deleted", "stopped"]);
    await host!.host.shutdown();
    expect(held()).toBe(0);
  });

  test("a steered prompt's uploads are recorded, never read: its agent takes only its text", async () => {
    const { taken, finish } = await open({ maxTurnAttachmentBytes: 4 * MIB });
    const a = await upload(3 * MIB);
    const s1 = await newSession();
    expect(await prompt(s1, "steerable", [])).toMatchObject({ queued: false });
    const queued = await peer!.call<{ itemId: string }>("session.prompt", {
      sessionId: s1,
      text: "steered",
      clientMessageId: "steered",
      attachments: named([a]),
    });
    await peer!.call("session.updateQueue", { sessionId: s1, op: { steer: true, itemId: queued.itemId } });
    const reads = vi.spyOn(host!.store, "getAttachment");
    finish("steerable");
    await until(() => taken.includes("steered"), 10_000, "the steered prompt taken");
    expect(reads).not.toHaveBeenCalled();
    const page = await peer!.call<{ events: { type: string; data: { attachments?: unknown[] } }[] }>(
      "session.page",
      { sessionId: s1 },
    );
    const interjection = page.events.filter((e) => e.type === "user/message").at(-1);
    expect(interjection?.data.attachments).toEqual([
      expect.objectContaining({ name: "f0", attachmentId: a, size: 3 * MIB }),
    ]);
  });
});

describe("a queued prompt waiting for attachment room", () => {
  test("keeps its session's agent when the principal's next agent needs room: it starts once room comes back", async () => {
    const { agent, started, finish } = holdingAgent();
    const { logger, lines } = capturedLogger();
    const dir = tempDir();
    const store = SqliteSessionStore.open(dir.file("sessions.db"));
    const sessionHost = new SessionHost({
      store,
      agent,
      logger,
      maxTurnAttachmentBytes: 768 * KIB,
      maxLiveAgentsPerPrincipal: 2,
    });
    await sessionHost.start();
    try {
      const inline = (bytes: number) => [
        { name: "f", type: "application/octet-stream", bytes: new Uint8Array(bytes).fill(1) },
      ];
      const send = (sessionId: string, text: string, bytes = 0) =>
        sessionHost.call(ADMIN, "session.prompt", {
          sessionId,
          text,
          clientMessageId: text,
          ...(bytes > 0 ? { attachments: inline(bytes) } : {}),
        });
      for (const sessionId of ["s1", "s2", "s3"])
        await sessionHost.call(ADMIN, "session.create", { sessionId });
      expect(await send("s1", "hold", 512 * KIB)).toMatchObject({ queued: false });
      expect(await send("s2", "plain")).toMatchObject({ queued: false });
      expect(await send("s2", "queued", 384 * KIB)).toMatchObject({ queued: true });
      finish("plain");
      await until(
        () => lines.some((l) => l.msg === "queued prompt could not start" && l.sessionId === "s2"),
        10_000,
        "the queued prompt refused for room",
      );
      // s2 has work waiting: it is not an idle agent to detach for s3's
      const third = await send("s3", "third").then(
        () => "accepted",
        (err: SessionmuxError) => err.code,
      );
      expect(third).toBe("too_many_agents");
      finish("hold");
      await until(() => started.includes("queued"), 10_000, "the queued prompt started");
    } finally {
      await sessionHost.shutdown();
      await store.close();
      dir.remove();
    }
  }, 30_000);
  test("keeps its session's agent past the idle time when a call touched it meanwhile: it starts once room comes back", async () => {
    const { agent, started, finish } = holdingAgent();
    const { logger, lines } = capturedLogger();
    const dir = tempDir();
    const store = SqliteSessionStore.open(dir.file("sessions.db"));
    const sessionHost = new SessionHost({
      store,
      agent,
      logger,
      maxTurnAttachmentBytes: 768 * KIB,
      idleDetachMs: 200,
    });
    await sessionHost.start();
    try {
      const send = (sessionId: string, text: string, bytes = 0) =>
        sessionHost.call(ADMIN, "session.prompt", {
          sessionId,
          text,
          clientMessageId: text,
          ...(bytes > 0
            ? { attachments: [{ name: "f", type: "application/octet-stream", bytes: new Uint8Array(bytes) }] }
            : {}),
        });
      for (const sessionId of ["s1", "s2", "s3"])
        await sessionHost.call(ADMIN, "session.create", { sessionId });
      expect(await send("s1", "hold", 512 * KIB)).toMatchObject({ queued: false });
      expect(await send("s2", "plain")).toMatchObject({ queued: false });
      expect(await send("s2", "queued", 384 * KIB)).toMatchObject({ queued: true });
      finish("plain");
      await until(
        () => lines.some((l) => l.msg === "queued prompt could not start" && l.sessionId === "s2"),
        10_000,
        "the queued prompt refused for room",
      );
      // a call that asks s2's agent for nothing else restarts its idle clock; s3's, started just
      // after with nothing to do, runs out after it
      await sessionHost.call(ADMIN, "session.selectModel", { sessionId: "s2", model: "demo-fast" });
      await sessionHost.call(ADMIN, "session.selectModel", { sessionId: "s3", model: "demo-fast" });
      await until(() => !sessionHost.live.isLive("s3"), 10_000, "s3's idle agent detached");
      // before, s2's went too, and nothing started its queued prompt when room came back
      expect(sessionHost.live.isLive("s2")).toBe(true);
      finish("hold");
      await until(() => started.includes("queued"), 10_000, "the queued prompt started");
    } finally {
      await sessionHost.shutdown();
      await store.close();
      dir.remove();
    }
  }, 30_000);
});

describe("waiting for attachment room", () => {
  /** The bytes held when `take` refused `bytes` more, read from its refusal. */
  function refusedAt(budget: TurnAttachmentBudget, owner: string, bytes: number): number {
    try {
      budget.take(owner, bytes);
    } catch (err) {
      const held = heldWhenRefused(err);
      if (held !== undefined) return held;
      throw err;
    }
    throw new Error("the take fitted");
  }

  test("a wait begun after bytes were given back since the refusal wakes at once", async () => {
    const budget = new TurnAttachmentBudget(4 * MIB);
    const giveBack = budget.take("alice", 3 * MIB);
    const held = refusedAt(budget, "alice", 2 * MIB);
    expect(held).toBe(3 * MIB);
    // the turn ends between the refusal and the wait's start
    giveBack();
    const woken = vi.fn();
    budget.whenRoom("alice", held, woken);
    await Promise.resolve();
    expect(woken).toHaveBeenCalledTimes(1);
    expect(budget.take("alice", 2 * MIB)).toBeTypeOf("function");
  });

  test("a wait wakes once, when a turn gives bytes back, and not once forgotten", async () => {
    const budget = new TurnAttachmentBudget(4 * MIB);
    const giveBack = budget.take("alice", 3 * MIB);
    const held = refusedAt(budget, "alice", 2 * MIB);
    const [woken, forgottenOne, othersOne] = [vi.fn(), vi.fn(), vi.fn()];
    budget.whenRoom("alice", held, woken);
    budget.whenRoom("alice", held, forgottenOne)();
    const bobGives = budget.take("bob", MIB);
    budget.whenRoom("bob", MIB, othersOne);
    await Promise.resolve();
    expect(woken).not.toHaveBeenCalled();
    giveBack();
    giveBack();
    await Promise.resolve();
    expect(woken).toHaveBeenCalledTimes(1);
    expect(forgottenOne).not.toHaveBeenCalled();
    expect(othersOne).not.toHaveBeenCalled();
    bobGives();
    expect(othersOne).toHaveBeenCalledTimes(1);
  });
});
