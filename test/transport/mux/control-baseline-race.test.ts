import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { ControlItem, Interaction } from "../../../protocol/index.js";
import {
  type ControlMirror,
  EMPTY_MIRROR,
  reduceControl,
} from "../../../src/client/control-mirror-reducer.js";
import { ADMIN } from "../../../src/host/principal.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { connect, createSession, STORE_VARIANTS } from "./mux-fixture.js";

/**
 * Session-controller note, verification item: a change made while the control baseline is being
 * built appears exactly once, in the baseline or as a delta after it; never lost, and never
 * applied twice in a way a mirror would go wrong (a stale projection over a newer one, an
 * interaction brought back after its answer).
 */

const SESSIONS = 24;
const ROUNDS = 8;

/** The mirror a client builds from the items, checking at each step that no projection goes back. */
function mirrorOf(items: ControlItem[]): ControlMirror {
  let mirror = EMPTY_MIRROR;
  for (const item of items) {
    const next = reduceControl(mirror, item);
    for (const [sessionId, row] of Object.entries(mirror.projections)) {
      const after = next.projections[sessionId];
      if (after && after.seq < row.seq)
        expect.fail(`projection of ${sessionId} went back ${row.seq} → ${after.seq}`);
    }
    mirror = next;
  }
  return mirror;
}

/** An empty queue or job list and an absent one mean the same. */
const nonEmpty = <T>(record: Readonly<Record<string, readonly T[]>>) =>
  Object.fromEntries(Object.entries(record).filter(([, list]) => list.length > 0));

function comparable(m: ControlMirror) {
  return {
    agents: m.agents,
    queues: nonEmpty(m.queues),
    jobs: nonEmpty(m.jobs),
    interactions: Object.keys(m.interactions).sort(),
    projections: Object.fromEntries(
      Object.values(m.projections)
        .filter((p) => m.agents[p.sessionId] !== undefined)
        .map((p) => [p.sessionId, [p.seq, p.lastState]]),
    ),
  };
}

describe.each(STORE_VARIANTS)(
  "a change made while the control baseline is being built ($name)",
  ({ options }) => {
    let h: TestHost;
    let owner: MuxPeer;
    const sessions: string[] = [];

    beforeAll(async () => {
      h = await startTestHost(options);
      owner = await connect(h);
      for (let i = 0; i < SESSIONS; i++) {
        const sessionId = await createSession(owner);
        await owner.call("session.prompt", { sessionId, text: "/approve step", clientMessageId: "c0" });
        sessions.push(sessionId);
      }
      // every session live, each waiting on an approval: the baseline reads one projection per session
      await vi.waitFor(() => expect(h.host.live.interactions()).toHaveLength(SESSIONS), {
        timeout: 20_000,
        interval: 20,
      });
    });
    afterAll(async () => {
      await owner?.disconnect();
      await h?.dispose();
    });

    /** What a fresh baseline says now, in the mirror's terms (projections compared by seq and state). */
    async function truth() {
      const b = await h.host.controlBaseline(ADMIN);
      return comparable(reduceControl(EMPTY_MIRROR, b));
    }

    it("appears exactly once, in the baseline or as a delta, and the mirror converges on the host's state", async () => {
      const watcher = await connect(h);
      try {
        for (let round = 0; round < ROUNDS; round++) {
          const answered = h.host.live.interactions().find((i) => i.kind === "approval") as Interaction;
          const queuedTo = sessions[(round * 5 + 3) % SESSIONS]!;
          // sent in the same tick as the open: the host handles them while the baseline awaits its reads
          const control = watcher.open("session.control");
          const changes = Promise.all([
            watcher.call("session.respond", {
              interactionId: answered.interactionId,
              response: { outcome: "approve" },
            }),
            watcher.call("session.prompt", {
              sessionId: queuedTo,
              text: "/approve next",
              clientMessageId: `r${round}`,
            }),
          ]);
          const [, queued] = (await changes) as [unknown, { queued: boolean; itemId?: string }];
          const items = () => watcher.items<ControlItem>(control);
          await vi.waitFor(async () => expect(comparable(mirrorOf(items()))).toEqual(await truth()), {
            timeout: 20_000,
            interval: 25,
          });
          const [baseline, ...deltas] = items();
          expect(baseline?.kind).toBe("baseline");
          expect(deltas.filter((d) => d.kind === "baseline")).toEqual([]);
          // the answer: gone from the mirror, and never re-added after its removal
          const touching = items().flatMap((item, at) =>
            item.kind === "interaction.resolved" && item.interactionId === answered.interactionId
              ? [{ at, kind: "resolved" }]
              : item.kind === "interaction.requested" &&
                  item.interaction.interactionId === answered.interactionId
                ? [{ at, kind: "requested" }]
                : [],
          );
          const inBaseline =
            baseline?.kind === "baseline" &&
            baseline.interactions.some((i) => i.interactionId === answered.interactionId);
          expect(inBaseline || touching.some((t) => t.kind === "resolved")).toBe(true);
          expect(touching.at(-1)?.kind ?? "resolved").toBe("resolved");
          // the queued prompt: in the baseline's queue or a queue delta, once in the mirror
          if (queued.queued) {
            const ids = (mirrorOf(items()).queues[queuedTo] ?? []).map((q) => q.itemId);
            const live = h.host.live.queue(queuedTo).map((q) => q.itemId);
            expect(ids).toEqual(live);
            expect(new Set(ids).size).toBe(ids.length);
          }
          watcher.close(control);
        }
      } finally {
        await watcher.disconnect();
      }
    });
  },
);
