import { describe, expect, it, vi } from "vitest";
import { CommitListeners } from "../../../src/store/commit-listeners.js";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import { PgLiveFeed } from "../../../src/store/postgres/pg-live-feed.js";
import { PgLiveReads } from "../../../src/store/postgres/pg-live-rows.js";
import { openPool } from "../../../src/store/postgres/pg-pool.js";
import { turnEnd, turnStart, userMessage } from "../open-store.js";
import { backends, pgUrl, storeFixture } from "./backends.js";

const S = "s";
const ask = (turnId: string, interactionId: string) => ({
  type: "interaction/requested" as const,
  data: { turnId, interactionId, kind: "approval" as const, action: "deploy" },
});

// SQLite has one writing instance per file (see cross-instance.test.ts): nothing to carry across.
for (const backend of backends.filter((b) => b.sharedWriters)) {
  describe(`live-state notices across instances [${backend.name}]`, () => {
    const open = storeFixture(backend);

    it("every notice made on A reaches a listener on B exactly once, in order", async () => {
      const { store: a, openAnother } = await open();
      const b = await openAnother();
      const onA: LiveStateNotice[] = [];
      const onB: LiveStateNotice[] = [];
      a.subscribeLive((notice) => onA.push(notice));
      b.subscribeLive((notice) => onB.push(notice));
      await a.create({ sessionId: S, owner: "alice", model: "m" });
      // one step at a time, each awaited on B, so no two re-reads can see the same rows
      const steps: (() => Promise<unknown>)[] = [
        () => a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } }),
        () => a.editQueueItem(S, "q1", "uno"),
        () => a.append(S, [turnStart("t1"), userMessage("go"), ask("t1", "i1")]),
        () => a.resolveInteraction("i1", { outcome: "approve" }),
        () => a.append(S, [ask("t1", "i2")]),
        () => a.append(S, [{ type: "job/started", data: { jobId: "j1", turnId: "t1", label: "build" } }]),
        () => a.setJobProgress("j1", 0.5),
        () => a.append(S, [turnEnd("t1", "cancelled")]),
        () => a.acquireLease(S, "host-a", 60_000),
        () => a.removeQueueItem(S, "q1"),
      ];
      for (const step of steps) {
        await step();
        await vi.waitFor(() => expect(onB.length).toBe(onA.length), { timeout: 20_000 });
      }
      expect(onB).toEqual(onA);
      expect(onA.map((n) => n.kind)).toEqual([
        "queue",
        "queue",
        "interaction.requested",
        "interaction.resolved",
        "interaction.requested",
        "job.progress",
        "interaction.withdrawn",
        "lease",
        "queue",
      ]);
      // B's own change reaches A too, and neither hears its own twice
      await b.enqueuePrompt({ sessionId: S, itemId: "q2", queuedAt: 2, input: { text: "two" } });
      await vi.waitFor(() => expect(onA.length).toBe(onB.length), { timeout: 20_000 });
      expect(onA.at(-1)).toEqual(onB.at(-1));
      expect(onA.at(-1)).toMatchObject({ kind: "queue", items: [{ itemId: "q2" }] });
    });

    it("a re-read after missed wake-ups announces each change once and nothing twice", async () => {
      const under = await open();
      const a = under.store;
      const pool = openPool(pgUrl as string, { schema: under.schema!, max: 2 });
      try {
        const listeners = new CommitListeners();
        const seen: LiveStateNotice[] = [];
        listeners.subscribeLive((notice) => seen.push(notice));
        // a feed that heard no NOTIFY at all: only the re-read can tell it anything
        const feed = new PgLiveFeed(listeners, new PgLiveReads(pool));
        await a.create({ sessionId: S, owner: "alice", model: "m" });
        await a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } });
        await a.append(S, [turnStart("t1"), ask("t1", "i1"), ask("t1", "i2")]);
        await a.acquireLease(S, "host-a", 60_000);
        await feed.rereadAll();
        expect(seen.map((n) => n.kind)).toEqual([
          "queue",
          "interaction.requested",
          "interaction.requested",
          "lease",
        ]);
        await feed.rereadAll();
        expect(seen).toHaveLength(4);
        await a.resolveInteraction("i1", { outcome: "deny" });
        await a.clearQueue(S);
        await a.append(S, [turnEnd("t1", "cancelled")]);
        await feed.rereadAll();
        // a re-read cannot know the order the changes committed in: each once, in any order
        expect(seen).toHaveLength(7);
        expect(seen.slice(4)).toEqual(
          expect.arrayContaining([
            { kind: "queue", sessionId: S, owner: "alice", items: [] },
            {
              kind: "interaction.resolved",
              owner: "alice",
              sessionId: S,
              interactionId: "i1",
              resolution: { outcome: "deny" },
            },
            { kind: "interaction.withdrawn", owner: "alice", sessionId: S, interactionId: "i2" },
          ]),
        );
      } finally {
        await pool.end();
      }
    });
  });
}
