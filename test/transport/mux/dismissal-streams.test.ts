import { describe, expect, inject, it } from "vitest";
import type { SessionEvent } from "../../../protocol/index.js";
import type { RunningHost } from "../../../src/server.js";
import { peersCleanedBy } from "../../support/cleaned-peer.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, startTestHost, TEST_TOKENS } from "../../support/host.js";
import { schemaHosts } from "../../support/schema-hosts.js";

/**
 * A dismissal is a principal's own: it changes that principal's lists and nothing about the
 * session. Both stores announce it as a commit notice (list caches drop their answers on it), and
 * that notice must send nothing to any stream: not to the followers of the session, not to the
 * control streams of those who see it (another principal, an admin, nor the principal's own
 * tabs, who hear of it by `session.dismissed`). On PostgreSQL the other host hears it through the
 * commit feed and must send nothing either.
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const peer = peersCleanedBy(cleanups);

interface Hosts {
  /** Where the dismissals are made. */
  near: RunningHost;
  /** Another host on the same database (SQLite: the same host). */
  far: RunningHost;
}

async function sqliteHosts(): Promise<Hosts> {
  const host = await startTestHost();
  cleanups.push(() => host.dispose());
  return { near: host, far: host };
}

async function postgresHosts(): Promise<Hosts> {
  const { start } = schemaHosts(pgUrl, "dismissal_streams", TEST_TOKENS, cleanups);
  const near = await start("host-near");
  return { near, far: await start("host-far") };
}

type Item = { kind: string; sessionId?: string; projection?: { title: string }; events?: SessionEvent[] };

const variants = [
  { name: "sqlite", hosts: sqliteHosts, skip: false },
  { name: "postgres, two hosts", hosts: postgresHosts, skip: !pgUrl },
];

describe.each(variants)("a dismissal's commit notice on streams ($name)", ({ hosts, skip }) => {
  it.skipIf(skip)(
    "adds no frame to any follower or control stream, of the principal or of another who sees the session",
    async () => {
      const { near, far } = await hosts();
      const alice = await peer(near, ALICE_TOKEN);
      const { header } = await alice.call<{ header: { sessionId: string } }>("session.create", {
        title: "first",
      });
      const sessionId = header.sessionId;
      const watchers = [
        await peer(near, ALICE_TOKEN),
        await peer(far, ALICE_TOKEN),
        await peer(near, ADMIN_TOKEN),
        await peer(far, ADMIN_TOKEN),
      ];
      const bob = await peer(far, BOB_TOKEN);
      const streams = await Promise.all(
        watchers.map(async (p) => {
          const control = p.open("session.control");
          const follow = p.follow(sessionId);
          await p.waitItem(control, (i) => i.kind === "baseline");
          await p.waitItem(follow, (i) => i.kind === "caughtUp");
          return { p, control, follow };
        }),
      );
      const bobControl = bob.open("session.control");
      await bob.waitItem(bobControl, (i) => i.kind === "baseline");
      // a commit every stream has seen before the mark (the create reaches the far host on its own time)
      await alice.call("session.rename", { sessionId, title: "before" });
      for (const { p, control, follow } of streams) {
        await p.waitItem<Item>(control, (i) => i.kind === "projection" && i.projection?.title === "before");
        await p.waitItem<Item>(follow, (i) => (i.events ?? []).some((e) => e.type === "session/renamed"));
      }
      const mark = streams.map(({ p, control, follow }) => ({
        control: p.items(control).length,
        follow: p.items(follow).length,
      }));
      const bobMark = bob.items(bobControl).length;

      const admin = await peer(near, ADMIN_TOKEN);
      await alice.call("session.dismiss", { sessionId });
      await alice.call("session.restore", { sessionId });
      await alice.call("session.dismiss", { sessionId });
      await admin.call("session.dismiss", { sessionId });
      await admin.call("session.restore", { sessionId });
      // a commit after them: it reaches every stream after anything they could have sent
      await alice.call("session.rename", { sessionId, title: "second" });

      for (const [n, { p, control, follow }] of streams.entries()) {
        await p.waitItem<Item>(
          control,
          (i) => i.kind === "projection" && i.sessionId === sessionId && i.projection?.title === "second",
        );
        await p.waitItem<Item>(follow, (i) =>
          (i.events ?? []).some((e) => e.type === "session/renamed" && e.data.title === "second"),
        );
        const controlItems = p
          .items<Item>(control)
          .slice(mark[n]!.control)
          .filter((i) => i.sessionId === sessionId);
        expect(controlItems.map((i) => [i.kind, i.projection?.title])).toEqual([["projection", "second"]]);
        const followItems = p.items<Item>(follow).slice(mark[n]!.follow);
        expect(followItems.map((i) => [i.kind, i.events?.map((e) => e.type)])).toEqual([
          ["events", ["session/renamed"]],
        ]);
      }
      expect(bob.items(bobControl).slice(bobMark)).toEqual([]);
    },
    60_000,
  );
});
