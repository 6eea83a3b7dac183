import { describe, expect, it, vi } from "vitest";
import type { SessionRow } from "../../protocol/index.js";
import type { ConsoleLink } from "../../web/src/console-link.js";
import type { SessionCache } from "../../web/src/session-cache.js";
import { SessionListModel } from "../../web/src/session-list-model.js";
import { gate } from "../support/gate.js";
import { opensAfter, useRetryTimers } from "./retry-timers.js";

const row = (sessionId: string, updatedAt: number, lastState: SessionRow["lastState"]): SessionRow => ({
  sessionId,
  title: sessionId,
  createdAt: updatedAt,
  updatedAt,
  lastPromptAt: null,
  turnCount: 1,
  blank: false,
  lastState,
  live: false,
  running: false,
  seq: 1,
});

/**
 * A session list model on fake timers over a scripted link: the dismissed sessions have a page
 * past the first, so a parked row older than that page is held aside and the parked sessions are
 * read for it; once `failing`, every such read fails and is recorded.
 */
async function heldAsideModel(failure: Promise<void> = Promise.resolve()) {
  const parkedReads: unknown[] = [];
  let failing = false;
  const link = {
    async list(_limit: number, filter: { parked?: true; dismissed?: true; before?: string } = {}) {
      if (filter.parked) {
        if (!failing) return { sessions: [] };
        parkedReads.push(filter);
        await failure;
        throw new Error("the read failed");
      }
      if (filter.dismissed) return { sessions: [row("dismissed", 100, "completed")], next: "older" };
      return { sessions: [] };
    },
  } as unknown as ConsoleLink;
  const cache = {
    loadRows: async () => [],
    saveRows: async () => undefined,
  } as unknown as SessionCache;
  const model = new SessionListModel(link, cache, () => undefined);
  await model.refresh();
  failing = true;
  model.project(row("waiting", 50, "input-required"));
  await vi.waitFor(() => expect(parkedReads).toHaveLength(1));
  return { parkedReads, model };
}

useRetryTimers();

describe("console session list: reading the parked sessions again after a failed read", () => {
  it("reads them again after 2 s, then after twice as long while the reads fail", async () => {
    const { parkedReads, model } = await heldAsideModel();
    expect(model.row("waiting")).toBeUndefined();
    await opensAfter(parkedReads, 2_000);
    await opensAfter(parkedReads, 4_000);
    model.dispose();
  });

  it("reads nothing more once disposed during a wait", async () => {
    const { parkedReads, model } = await heldAsideModel();
    model.dispose();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(parkedReads).toHaveLength(1);
  });

  it("starts no wait for a read that fails after the model was disposed", async () => {
    const failure = gate();
    const { parkedReads, model } = await heldAsideModel(failure.promise);
    model.dispose();
    failure.open();
    await vi.advanceTimersByTimeAsync(0);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(parkedReads).toHaveLength(1);
  });
});
