import fc from "fast-check";
import { expect, it } from "vitest";
import type { NewEvent } from "../../../protocol/index.js";
import { UNDO_LOG_KEYS, UNDO_PG_LOG_KEYS } from "../../support/purge-migration.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";
import { tamper } from "./operator-hand.js";

/** The migration that added the count of an open turn's waiting interactions, on each store. */
const PENDING_COUNT_MIGRATION = { sqlite: 8, postgres: 9 };

type Step =
  | { op: "event"; pick: number; text: string; session: number }
  | { op: "clear"; session: number }
  | { op: "ack"; session: number; stale: boolean }
  | { op: "tick"; ms: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      op: fc.constant("event" as const),
      pick: fc.nat(11),
      text: fc.string({ maxLength: 90 }),
      session: fc.nat(2),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("clear" as const), session: fc.nat(2) }) },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant("ack" as const), session: fc.nat(2), stale: fc.boolean() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant("tick" as const), ms: fc.integer({ min: 1, max: 5_000 }) }),
  },
);

/** A random but protocol-shaped event: turns open and close, interactions come and go. */
function eventFor(pick: number, text: string, turn: string): NewEvent {
  switch (pick) {
    case 0:
      return turnStart(turn);
    case 1:
      return userMessage(text);
    case 2:
      return {
        type: "user/message",
        data: { messageId: "s", source: "server", text, attachments: [], meta: {} },
      };
    case 3:
      return { type: "assistant/delta", data: { turnId: turn, text } };
    case 4:
      return { type: "interaction/requested", data: { turnId: turn, interactionId: "i", kind: "approval" } };
    case 5:
      return {
        type: "interaction/resolved",
        data: { interactionId: "i", resolution: { outcome: "approve" } },
      };
    case 6:
      return turnEnd(turn, "completed");
    case 7:
      return turnEnd(turn, "failed");
    case 8:
      return { type: "session/renamed", data: { title: text } };
    case 9:
      return { type: "session/model", data: { model: `m-${text.length}` } };
    case 10:
      return {
        type: "user/message",
        data: { messageId: "h", source: "user", text, hidden: true, attachments: [], meta: {} },
      };
    default:
      return { type: "reasoning/delta", data: { turnId: turn, text } };
  }
}

describeContract("projection", (backend) => {
  const open = storeFixture(backend);
  it("equals a rebuild from the log for random histories", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 60 }), fc.boolean(), async (steps, titled) => {
        let clock = 1_000_000;
        const run = await backend.open({ now: () => clock });
        try {
          const { store } = run;
          const ids = ["p0", "p1", "p2"];
          for (const id of ids)
            await store.create({ sessionId: id, owner: "o", model: "m", ...(titled ? { title: "T" } : {}) });
          let turn = 0;
          for (const s of steps) {
            if (s.op === "tick") clock += s.ms;
            else if (s.op === "clear") await store.clear(ids[s.session]!);
            else if (s.op === "ack") {
              const row = await store.projection(ids[s.session]!);
              await store.ack(ids[s.session]!, (row?.completionSettledAt ?? 0) - (s.stale ? 1 : 0));
            } else {
              if (s.pick === 0) turn++;
              await store.append(ids[s.session]!, [eventFor(s.pick, s.text, `t${turn}`)]);
            }
          }
          const incremental = await Promise.all(ids.map((id) => store.projection(id)));
          const listed = (await store.list({ limit: 10 })).rows;
          await store.rebuildProjections();
          const rebuilt = await Promise.all(ids.map((id) => store.projection(id)));
          expect(rebuilt).toEqual(incremental);
          expect((await store.list({ limit: 10 })).rows).toEqual(listed);
        } finally {
          await run.dispose();
        }
      }),
      { numRuns: 40 },
    );
    // each run creates and migrates a database of its own (on PostgreSQL a schema: DDL, not appends)
  }, 180_000);

  it("an append of many events folds them as the same events appended one by one", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ pick: fc.nat(11), text: fc.string({ maxLength: 40 }) }), {
          minLength: 1,
          maxLength: 40,
        }),
        fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 1, maxLength: 10 }),
        async (picks, sizes) => {
          const run = await backend.open({ now: () => 5_000 });
          try {
            const { store } = run;
            await store.create({ sessionId: "one", owner: "o", model: "m" });
            await store.create({ sessionId: "many", owner: "o", model: "m" });
            let turn = 0;
            const events = picks.map((p) => {
              if (p.pick === 0) turn++;
              return eventFor(p.pick, p.text, `t${turn}`);
            });
            for (const event of events) await store.append("one", [event]);
            let at = 0;
            for (let i = 0; at < events.length; i++) {
              const size = sizes[i % sizes.length]!;
              const before = await store.projection("many");
              const frozen = structuredClone(before);
              await store.append("many", events.slice(at, at + size));
              // a row read before an append is never changed by it
              expect(before).toEqual(frozen);
              at += size;
            }
            const one = await store.projection("one");
            const many = await store.projection("many");
            expect({ ...many, sessionId: "one", epoch: one?.epoch }).toEqual(one);
            await store.rebuildProjections();
            expect(await store.projection("many")).toEqual(many);
          } finally {
            await run.dispose();
          }
        },
      ),
      { numRuns: 25 },
    );
  }, 180_000);

  it("follows the documented rules for a typical history", async () => {
    let clock = 1_000;
    const { store } = await open({ now: () => clock });
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    expect(await store.projection("a")).toMatchObject({
      title: "New chat",
      blank: true,
      lastState: "idle",
      turnCount: 0,
      messageCount: 0,
      updatedAt: 1_000,
      lastPromptAt: null,
    });
    clock = 2_000;
    const long = `${"word ".repeat(30)}\nsecond line`;
    await store.append("a", [turnStart("t1"), userMessage(long)]);
    let row = await store.projection("a");
    expect(row?.title).toBe("word ".repeat(16).trim());
    expect(row).toMatchObject({
      blank: false,
      lastState: "working",
      turnCount: 1,
      lastPromptAt: 2_000,
      updatedAt: 2_000,
    });
    await store.append("a", [
      { type: "assistant/delta", data: { turnId: "t1", text: "a" } },
      { type: "assistant/delta", data: { turnId: "t1", text: "b" } },
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i1", kind: "question", question: "?" },
      },
    ]);
    row = await store.projection("a");
    expect(row).toMatchObject({ lastState: "input-required", messageCount: 2, openTurnId: "t1" });
    expect((await store.list({ limit: 10, parked: true })).rows.map((r) => r.sessionId)).toEqual(["a"]);
    clock = 3_000;
    await store.append("a", [
      { type: "interaction/resolved", data: { interactionId: "i1", resolution: { answer: "x" } } },
      turnEnd("t1"),
    ]);
    row = await store.projection("a");
    expect(row).toMatchObject({
      lastState: "completed",
      openTurnId: null,
      hasUnseenCompletion: true,
      completionSettledAt: 3_000,
    });
    // a server message neither moves the session in the list nor counts as an operator prompt
    clock = 9_000;
    await store.append("a", [
      {
        type: "user/message",
        data: { messageId: "s", source: "server", text: "x", attachments: [], meta: {} },
      },
    ]);
    row = await store.projection("a");
    expect(row).toMatchObject({ updatedAt: 2_000, lastPromptAt: 2_000, messageCount: 3 });
    await store.append("a", [{ type: "session/renamed", data: { title: "Named" } }]);
    expect((await store.header("a")).status === "ok").toBe(true);
    expect((await store.projection("a"))?.title).toBe("Named");
  });

  it("keeps an explicit title against the first prompt, and derives one from a prompt with words only", async () => {
    const { store } = await open();
    for (const id of ["renamed", "blank", "spaced"])
      await store.create({ sessionId: id, owner: "o", model: "m" });
    // a rename before any prompt is explicit: the first prompt does not replace it
    await store.append("renamed", [{ type: "session/renamed", data: { title: "Named" } }]);
    await store.append("renamed", [turnStart("t1"), userMessage("hello there")]);
    // a prompt of whitespace only gives no title
    await store.append("blank", [turnStart("t1"), userMessage(" \n\t ")]);
    // the title is the prompt on one line: runs of whitespace are one space, none at either end
    await store.append("spaced", [turnStart("t1"), userMessage("  \n first\t\tline \n\n second  ")]);
    expect((await store.projection("renamed"))?.title).toBe("Named");
    expect(await store.projection("blank")).toMatchObject({ title: "New chat", blank: false });
    expect((await store.projection("spaced"))?.title).toBe("first line second");
  });

  it("shows a model change in the row and the header", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m1" });
    await store.append("a", [{ type: "session/model", data: { model: "m2" } }]);
    expect((await store.projection("a"))?.model).toBe("m2");
    expect(await store.header("a")).toMatchObject({ status: "ok", header: { model: "m2" } });
  });

  it("counts no assistant message for a turn whose text deltas were all empty", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [
      turnStart("t1"),
      userMessage("q"),
      delta("t1", ""),
      delta("t1", ""),
      turnEnd("t1"),
    ]);
    expect((await store.projection("a"))?.messageCount).toBe(1);
    await store.append("a", [
      turnStart("t2"),
      userMessage("q"),
      delta("t2", ""),
      delta("t2", "a"),
      turnEnd("t2"),
    ]);
    expect((await store.projection("a"))?.messageCount).toBe(3);
  });

  it("is input-required only while an open turn waits on an interaction", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const request = (turnId: string, interactionId: string) => ({
      type: "interaction/requested" as const,
      data: { turnId, interactionId, kind: "approval" as const, action: interactionId },
    });
    const parked = async () =>
      (await store.list({ limit: 10, parked: true })).rows.map((row) => row.sessionId);
    await store.append("a", [turnStart("t1"), request("t1", "i1")]);
    expect((await store.projection("a"))?.lastState).toBe("input-required");
    expect(await parked()).toEqual(["a"]);
    await store.resolveInteraction("i1", { outcome: "approve" });
    expect((await store.projection("a"))?.lastState).toBe("working");
    expect(await parked()).toEqual([]);
    await store.append("a", [turnEnd("t1")]);
    // a request for a turn that already ended parks nothing
    await store.append("a", [request("t1", "late")]);
    expect((await store.projection("a"))?.lastState).toBe("completed");
    expect(await parked()).toEqual([]);
  });

  it("stays input-required and parked while any interaction of the turn still waits", async () => {
    const { store, openAnother } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const request = (interactionId: string) => ({
      type: "interaction/requested" as const,
      data: { turnId: "t1", interactionId, kind: "approval" as const, action: interactionId },
    });
    // two tool calls of one step ask for approval at once; the operator answers them one by one
    await store.append("a", [turnStart("t1"), request("i1"), request("i2")]);
    await store.resolveInteraction("i2", { outcome: "approve" });
    expect((await store.projection("a"))?.lastState).toBe("input-required");
    expect((await store.list({ limit: 10, parked: true })).rows.map((row) => row.sessionId)).toEqual(["a"]);
    await store.rebuildProjections();
    expect((await store.projection("a"))?.lastState).toBe("input-required");
    // the count is in the stored row: a store that knows only the rows goes on from it
    await store.close();
    const again = await openAnother();
    expect((await again.list({ limit: 10, parked: true })).rows.map((row) => row.sessionId)).toEqual(["a"]);
    await again.resolveInteraction("i1", { outcome: "approve" });
    expect((await again.projection("a"))?.lastState).toBe("working");
    expect((await again.list({ limit: 10, parked: true })).rows).toEqual([]);
  });

  it("leaves nothing a cancelled turn waited on to the next turn", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const request = (turnId: string, interactionId: string) => ({
      type: "interaction/requested" as const,
      data: { turnId, interactionId, kind: "approval" as const, action: interactionId },
    });
    await store.append("a", [
      turnStart("t1"),
      request("t1", "i1"),
      request("t1", "i2"),
      turnEnd("t1", "cancelled"),
    ]);
    expect((await store.projection("a"))?.lastState).toBe("cancelled");
    await store.append("a", [turnStart("t2"), request("t2", "j1")]);
    await store.resolveInteraction("j1", { outcome: "approve" });
    expect((await store.projection("a"))?.lastState).toBe("working");
  });

  it("takes a resolution of nothing the open turn waits on as no answer to a later request", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [
      turnStart("t1"),
      { type: "interaction/resolved", data: { interactionId: "stray", resolution: { outcome: "approve" } } },
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i1", kind: "approval", action: "i1" },
      },
    ]);
    expect((await store.projection("a"))?.lastState).toBe("input-required");
    await store.resolveInteraction("i1", { outcome: "approve" });
    expect((await store.projection("a"))?.lastState).toBe("working");
  });

  it("counts the waiting interactions of a database from before the count when it is opened", async () => {
    const db = await open();
    const { store } = db;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.create({ sessionId: "b", owner: "o", model: "m" });
    const request = (interactionId: string) => ({
      type: "interaction/requested" as const,
      data: { turnId: "t1", interactionId, kind: "approval" as const, action: interactionId },
    });
    await store.append("a", [turnStart("t1"), request("a1"), request("a2")]);
    await store.resolveInteraction("a1", { outcome: "approve" });
    await store.append("b", [turnStart("t1"), request("b1")]);
    await store.resolveInteraction("b1", { outcome: "approve" });
    await store.close();
    // the schema before the count, with the row an earlier version wrote: shown working
    await tamper(
      db,
      db.path
        ? `${UNDO_LOG_KEYS} ALTER TABLE projections DROP COLUMN pending_interactions;
           UPDATE projections SET last_state = 'working'; PRAGMA user_version = ${PENDING_COUNT_MIGRATION.sqlite - 1}`
        : `${UNDO_PG_LOG_KEYS} ALTER TABLE projections DROP COLUMN pending_interactions; UPDATE projections SET last_state = 'working';
           DELETE FROM schema_migrations WHERE version >= ${PENDING_COUNT_MIGRATION.postgres}`,
    );
    const reopened = await db.openAnother();
    expect((await reopened.projection("a"))?.lastState).toBe("input-required");
    expect((await reopened.projection("b"))?.lastState).toBe("working");
    await reopened.resolveInteraction("a2", { outcome: "approve" });
    expect((await reopened.projection("a"))?.lastState).toBe("working");
  });

  it("goes on from the stored rows in a store opened again: titles, counts, what is unseen", async () => {
    const { store, openAnother } = await open();
    for (const id of ["titled", "untitled", "prompted", "texted", "silent"])
      await store.create({
        sessionId: id,
        owner: "o",
        model: "m",
        ...(id === "titled" ? { title: "T" } : {}),
      });
    await store.append("prompted", [turnStart("t1"), userMessage("hello"), turnEnd("t1")]);
    await store.append("texted", [turnStart("t1"), userMessage("q"), delta("t1", "a")]);
    await store.append("silent", [turnStart("t1"), userMessage("q")]);
    await store.close();
    const again = await openAnother();
    const listed = new Map((await again.list({ limit: 10 })).rows.map((row) => [row.sessionId, row]));
    expect(listed.get("prompted")).toMatchObject({ blank: false, hasUnseenCompletion: true, title: "hello" });
    expect(listed.get("untitled")).toMatchObject({ blank: true, hasUnseenCompletion: false });
    expect(await again.projection("prompted")).toMatchObject({ blank: false, hasUnseenCompletion: true });
    // whether a title is explicit comes from the row: only the untitled one takes the first prompt's
    await again.append("titled", [turnStart("t1"), userMessage("first")]);
    await again.append("untitled", [turnStart("t1"), userMessage("first")]);
    expect((await again.projection("titled"))?.title).toBe("T");
    expect((await again.projection("untitled"))?.title).toBe("first");
    // and whether the open turn already counted its assistant message
    await again.append("texted", [delta("t1", "b"), turnEnd("t1")]);
    await again.append("silent", [delta("t1", "b"), turnEnd("t1")]);
    expect((await again.projection("texted"))?.messageCount).toBe(2);
    expect((await again.projection("silent"))?.messageCount).toBe(2);
    // a rebuild there folds each log from the header the rows hold, which after a clear is all
    // that says whether the title was explicit
    for (const [id, title] of [
      ["renamed", { title: "T" }],
      ["derived", {}],
    ] as const) {
      await again.create({ sessionId: id, owner: "o", model: "m", ...title });
      await again.append(id, [turnStart("t1"), userMessage("before"), turnEnd("t1")]);
      await again.clear(id);
      await again.append(id, [turnStart("t2"), userMessage("after")]);
    }
    const ids = ["titled", "untitled", "prompted", "renamed", "derived"];
    const before = await Promise.all(ids.map((id) => again.projection(id)));
    expect(before.map((row) => row?.title)).toEqual(["T", "first", "hello", "T", "after"]);
    await again.close();
    const third = await openAnother();
    await third.rebuildProjections();
    expect(await Promise.all(ids.map((id) => third.projection(id)))).toEqual(before);
  });

  it("an ack after the clock stepped back covers only the completion it saw", async () => {
    let clock = 3_000;
    const { store } = await open({ now: () => clock });
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("t1"), turnEnd("t1")]);
    expect(await store.ack("a", 3_000)).toEqual({ status: "ok", hasUnseenCompletion: false });
    clock = 2_500;
    await store.append("a", [turnStart("t2"), turnEnd("t2")]);
    expect((await store.projection("a"))?.completionSettledAt).toBe(2_500);
    expect(await store.ack("a", 2_500)).toEqual({ status: "ok", hasUnseenCompletion: false });
    // the ack recorded 2_500, not the older 3_000: a completion after it is not hidden
    clock = 2_800;
    await store.append("a", [turnStart("t3"), turnEnd("t3")]);
    expect((await store.projection("a"))?.hasUnseenCompletion).toBe(true);
  });

  it("lets a stale ack never hide a newer completion", async () => {
    let clock = 1_000;
    const { store } = await open({ now: () => clock });
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("t1"), turnEnd("t1")]);
    clock = 2_000;
    await store.append("a", [turnStart("t2"), turnEnd("t2")]);
    expect(await store.ack("a", 1_000)).toEqual({ status: "ok", hasUnseenCompletion: true });
    expect(await store.ack("a", 2_000)).toEqual({ status: "ok", hasUnseenCompletion: false });
    clock = 3_000;
    await store.append("a", [turnStart("t3"), turnEnd("t3")]);
    expect((await store.projection("a"))?.hasUnseenCompletion).toBe(true);
    expect(await store.ack("nobody", 1)).toEqual({ status: "not_found" });
  });

  it("tells listeners of an ack that changed what is unseen, once: every tab acking it again changes nothing", async () => {
    const { store } = await open({ now: () => 1_000 });
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("t1"), turnEnd("t1")]);
    const kinds: string[] = [];
    store.subscribe("a", (notice) => kinds.push(notice.kind));
    const acks = await Promise.all([1_000, 1_000, 1_500].map((at) => store.ack("a", at)));
    expect(acks).toEqual(Array(3).fill({ status: "ok", hasUnseenCompletion: false }));
    expect(await store.ack("a", 1_000)).toEqual({ status: "ok", hasUnseenCompletion: false });
    expect(kinds).toEqual(["meta"]);
    expect((await store.projection("a"))?.hasUnseenCompletion).toBe(false);
  });

  it("keeps an ack through a rebuild of the projections and in the stored row", async () => {
    const { store, openAnother } = await open({ now: () => 1_000 });
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("t1"), turnEnd("t1")]);
    expect(await store.ack("a", 1_000)).toEqual({ status: "ok", hasUnseenCompletion: false });
    const acked = await store.projection("a");
    expect(acked?.hasUnseenCompletion).toBe(false);
    // a rebuild folds the log from the header, which must hold the ack: it is not an event
    await store.rebuildProjections();
    expect(await store.projection("a")).toEqual(acked);
    // and so does one by a store that knows only the rows
    await store.close();
    const again = await openAnother();
    expect(await again.projection("a")).toEqual(acked);
    await again.rebuildProjections();
    expect(await again.projection("a")).toEqual(acked);
  });

  it("closes every open turn as interrupted on interruptOpenTurns", async () => {
    const { store } = await open();
    for (const id of ["a", "b", "c"]) await store.create({ sessionId: id, owner: "o", model: "m" });
    await store.append("a", [turnStart("ta")]);
    await store.append("b", [turnStart("tb"), turnEnd("tb")]);
    await store.append("c", [turnStart("tc")]);
    expect((await store.interruptOpenTurns(5)).sort()).toEqual(["a", "c"]);
    const page = await store.page("a", { limit: 1 });
    expect(page.status === "ok" && page.events[0]).toEqual({
      seq: 3,
      at: 5,
      type: "turn/end",
      data: { turnId: "ta", state: "interrupted" },
    });
    expect((await store.projection("c"))?.lastState).toBe("interrupted");
    expect(await store.interruptOpenTurns(6)).toEqual([]);
  });
});
