import "fake-indexeddb/auto";
import { createStore } from "idb-keyval";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResultOf, SessionRow } from "../../protocol/index.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { ConsoleLink } from "../../web/src/console-link.js";
import { SessionCache } from "../../web/src/session-cache.js";
import { REMOVED_KEPT, SessionListModel } from "../../web/src/session-list-model.js";
import { orderSessions } from "../../web/src/session-list-order.js";
import { demoAgentWith } from "../host/host-fixture.js";
import { gate } from "../support/gate.js";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { useTestHost } from "../support/use-test-host.js";
import { HeldLink } from "./held-link.js";

/** A link whose reads of the parked sessions are answered by the host at once but handed on only when the test opens `held`. */
class HeldParkedLink extends ConsoleLink {
  held = gate();
  /** Reads of the parked sessions the host has answered, held or not. */
  parkedAnswered = 0;
  /** Of those, the ones handed on. */
  parkedHandedOn = 0;
  /** The next read of the parked sessions fails without asking the host. */
  failNext = false;
  parkedFailed = 0;

  override async list(
    limit: number,
    filter: { parked?: true; dismissed?: true; before?: string } = {},
  ): Promise<ResultOf<"session.list">> {
    if (filter.parked && this.failNext) {
      this.failNext = false;
      this.parkedFailed += 1;
      throw new Error("the read failed");
    }
    const answer = await super.list(limit, filter);
    if (filter.parked) {
      this.parkedAnswered += 1;
      await this.held.promise;
      this.parkedHandedOn += 1;
    }
    return answer;
  }
}

describe("console session list over pages", () => {
  const testHost = useTestHost();

  beforeAll(async () => {
    for (let i = 1; i <= 60; i++) await testHost.client.create({ title: `Session ${i}` });
  });

  it("shows one page's worth of the rows the live state describes until the host's first snapshot, then the snapshot's", async () => {
    const { client } = testHost;
    const link = new HeldLink(() => client, ADMIN_TOKEN);
    const cache = new SessionCache("p", {
      data: createStore("list-model-early", "entries"),
      usage: createStore("list-model-early-usage", "usage"),
    });
    const model = new SessionListModel(link, cache, () => {});
    // the control stream's projections describe every session, and may come before the snapshot
    const { sessions: all } = await client.call("session.list", { limit: 200 });
    for (const row of all) model.project(row);
    const shown = () => orderSessions(model.rows.values(), model.end).recent.map((row) => row.sessionId);
    expect(shown()).toEqual(all.slice(0, 50).map((row) => row.sessionId));
    await model.refresh();
    expect(shown()).toEqual(all.slice(0, 50).map((row) => row.sessionId));
    expect(model.older).toBe(true);
  });

  it("keeps a bounded number of deleted sessions off the list, the latest deleted among them", async () => {
    const { client } = testHost;
    const link = new HeldLink(() => client, ADMIN_TOKEN);
    const cache = new SessionCache("p", {
      data: createStore("list-model-removed", "entries"),
      usage: createStore("list-model-removed-usage", "usage"),
    });
    const model = new SessionListModel(link, cache, () => {});
    await model.refresh();
    const [row] = (await client.call("session.list", { limit: 1 })).sessions;
    // a busy host: many sessions deleted by others while the tab stays open
    for (let i = 0; i < 10_000; i++) model.apply({ kind: "removed", sessionId: `gone-${i}` });
    model.apply({ kind: "removed", sessionId: row!.sessionId });
    expect((model as unknown as { removed: Set<string> }).removed.size).toBeLessThanOrEqual(REMOVED_KEPT);
    // the live state's last row of the session deleted, and a snapshot read after: it stays gone
    model.project(row!);
    expect(model.row(row!.sessionId)).toBe(undefined);
    for (let i = 0; i < REMOVED_KEPT - 1; i++) model.apply({ kind: "removed", sessionId: `later-${i}` });
    model.project({ ...row!, seq: row!.seq + 1 });
    expect(model.row(row!.sessionId)).toBe(undefined);
  });

  it("keeps a row that moved or went while an older page was read as the host has it now, once", async () => {
    const { client } = testHost;
    const link = new HeldLink(() => client, ADMIN_TOKEN);
    const cache = new SessionCache("p", {
      data: createStore("list-model-test", "entries"),
      usage: createStore("list-model-test-usage", "usage"),
    });
    const model = new SessionListModel(link, cache, () => {});
    link.onListChange((change) => model.apply(change));
    await model.refresh();
    expect(model.rows.size).toBe(50);
    expect(model.older).toBe(true);

    // the second page is read now, and handed on only after two of its rows changed
    const loading = model.loadOlder();
    const { sessions: secondPage } = await client.call("session.list", {
      limit: 50,
      before: (await client.call("session.list", { limit: 50 })).next!,
    });
    const [moved, deleted] = [secondPage[2]!.sessionId, secondPage[5]!.sessionId];
    const { seq } = await client.call("session.rename", { sessionId: moved, title: "Renamed while paging" });
    await client.prompt({ sessionId: moved, text: "moves it to the top" });
    await client.call("session.delete", { sessionId: deleted });
    await expect.poll(() => (model.rows.get(moved)?.seq ?? 0) > seq && !model.rows.has(deleted)).toBe(true);
    link.held.open();
    await loading;

    const { sessions: all } = await client.call("session.list", { limit: 200 });
    const { pinned, recent } = orderSessions(model.rows.values(), model.end);
    const shown = [...pinned, ...recent].map((row) => row.sessionId);
    expect(model.older).toBe(false);
    expect(shown).toEqual(all.map((row) => row.sessionId));
    expect(model.rows.get(moved)?.title).toBe("Renamed while paging");
    expect(shown).not.toContain(deleted);
    // a reload paints the first page from the cache (one page is what it reads), not all of them
    await cache.settled();
    expect((await cache.loadRows()).map((row) => row.sessionId)).toEqual(shown.slice(0, 50));
  });

  it("moves an older dismissed page's sessions off the list, except one restored while the page was read", async () => {
    const { host } = testHost;
    const alice = createNodeClient({ url: host.wsUrl, token: ALICE_TOKEN });
    try {
      const created: string[] = [];
      for (let i = 1; i <= 55; i++) {
        const { sessionId } = (await alice.create({ title: `Dismissed ${i}` })).header;
        await alice.call("session.dismiss", { sessionId });
        created.push(sessionId);
      }
      const [oldest, restored] = [created[0]!, created[1]!];
      const link = new HeldLink(() => alice, ALICE_TOKEN);
      const cache = new SessionCache("alice", {
        data: createStore("list-model-dismissed", "entries"),
        usage: createStore("list-model-dismissed-usage", "usage"),
      });
      const model = new SessionListModel(link, cache, () => {});
      link.onListChange((change) => model.apply(change));
      await model.refresh();
      expect(model.dismissed.size).toBe(50);
      expect(model.hasOlder("dismissed")).toBe(true);
      // the control stream describes every session, the dismissed ones not loaded yet too
      const { sessions: older } = await alice.call("session.list", { limit: 200, dismissed: true });
      model.project(older.find((row) => row.sessionId === oldest)!);

      const loading = model.loadOlder("dismissed");
      await expect.poll(() => link.olderAnswered).toBe(1);
      await alice.call("session.restore", { sessionId: restored });
      await expect.poll(() => model.rows.has(restored)).toBe(true);
      link.held.open();
      await loading;

      expect(model.hasOlder("dismissed")).toBe(false);
      expect(model.dismissed.size).toBe(54);
      expect(model.dismissed.has(oldest)).toBe(true);
      expect(model.rows.has(oldest)).toBe(false);
      expect(model.rows.has(restored)).toBe(true);
      expect(model.dismissed.has(restored)).toBe(false);
    } finally {
      await alice.close();
    }
  });
});

describe("console session list: a session past the pages loaded that comes to wait on its owner", () => {
  /**
   * Turns asking for an approval start only once the test opens `started`, those asking a question
   * once it opens `asked`: a session prompted long ago parks while the list is loaded.
   */
  const started = gate();
  const asked = gate();
  let host: TestHost;
  let alice: SessionmuxClient;
  const old: string[] = [];

  beforeAll(async () => {
    host = await startTestHost({
      agent: demoAgentWith("held-start", async (turn, demo) => {
        await (turn.prompt.text.startsWith("/ask") ? asked : started).promise;
        return demo.runTurn(turn);
      }),
    });
    alice = createNodeClient({ url: host.wsUrl, token: ALICE_TOKEN });
    // three old sessions prompted first, then more than a page of listed and of dismissed ones
    for (const [title, text] of [
      ["Old, asks", "/approve deploy"],
      ["Old, asks, deleted", "/approve deploy"],
      ["Old, asks a question", "/ask which one?"],
    ] as const) {
      const { sessionId } = (await alice.create({ title })).header;
      await alice.prompt({ sessionId, text });
      old.push(sessionId);
    }
    for (let i = 1; i <= 110; i++) {
      const { sessionId } = (await alice.create({ title: `Session ${i}` })).header;
      if (i % 2 === 1) await alice.call("session.dismiss", { sessionId });
    }
  });

  afterAll(async () => {
    await alice?.close();
    await host?.dispose();
  });

  it("keeps off the list a session dismissed or deleted while the host is asked whether it is dismissed", async () => {
    const [waiting, deleted] = [old[0]!, old[1]!];
    const link = new HeldParkedLink(() => alice, ALICE_TOKEN);
    link.held.open();
    const cache = new SessionCache("alice", {
      data: createStore("list-model-parked", "entries"),
      usage: createStore("list-model-parked-usage", "usage"),
    });
    const model = new SessionListModel(link, cache, () => {});
    let removals = 0;
    link.onListChange((change) => {
      model.apply(change);
      if (change.kind === "removed") removals += 1;
    });
    await model.refresh();
    expect([model.row(waiting), model.row(deleted)]).toEqual([undefined, undefined]);

    // they park; the control stream's projections of them come while their dismissal is not known
    link.held = gate();
    started.open();
    let parked: SessionRow[] = [];
    await expect
      .poll(async () => {
        parked = (await alice.call("session.list", { parked: true })).sessions;
        return parked.map((row) => row.sessionId).sort();
      })
      .toEqual([waiting, deleted].sort());
    for (const row of parked) model.project(row);
    await expect.poll(() => link.parkedAnswered).toBe(2);
    // the host said neither is dismissed; before that answer is handed on, one is dismissed, one deleted
    await alice.call("session.dismiss", { sessionId: waiting });
    await alice.call("session.delete", { sessionId: deleted });
    await expect.poll(() => model.dismissed.has(waiting)).toBe(true);
    await expect.poll(() => removals).toBe(1);
    link.held.open();
    await expect.poll(() => link.parkedHandedOn).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(model.rows.has(waiting)).toBe(false);
    expect(model.dismissed.has(waiting)).toBe(true);
    expect(model.row(deleted)).toBe(undefined);

    // restored, it is on the list, pinned
    await alice.call("session.restore", { sessionId: waiting });
    await expect
      .poll(() => orderSessions(model.rows.values(), model.end).pinned.map((r) => r.sessionId))
      .toEqual([waiting]);
  });

  it("asks the host again after a wait when its read of the parked sessions fails", async () => {
    const waiting = old[2]!;
    const link = new HeldParkedLink(() => alice, ALICE_TOKEN);
    link.held.open();
    const cache = new SessionCache("alice", {
      data: createStore("list-model-parked-retry", "entries"),
      usage: createStore("list-model-parked-retry-usage", "usage"),
    });
    const model = new SessionListModel(link, cache, () => {});
    link.onListChange((change) => model.apply(change));
    await model.refresh();
    expect(model.row(waiting)).toBe(undefined);

    link.failNext = true;
    asked.open();
    let parked: SessionRow | undefined;
    await expect
      .poll(async () => {
        const { sessions } = await alice.call("session.list", { parked: true });
        parked = sessions.find((row) => row.sessionId === waiting);
        return parked !== undefined;
      })
      .toBe(true);
    model.project(parked!);
    await expect.poll(() => link.parkedFailed).toBe(1);
    expect(model.rows.has(waiting)).toBe(false);
    // the first wait is 2 s
    await expect.poll(() => model.rows.has(waiting), { timeout: 5_000 }).toBe(true);
    expect(orderSessions(model.rows.values(), model.end).pinned.map((row) => row.sessionId)).toContain(
      waiting,
    );
  });
});
