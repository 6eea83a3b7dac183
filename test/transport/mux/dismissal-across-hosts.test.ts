import { describe, expect, inject, it } from "vitest";
import type { SessionRow } from "../../../protocol/index.js";
import type { RunningHost } from "../../../src/server.js";
import { peersCleanedBy } from "../../support/cleaned-peer.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, TEST_TOKENS } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { schemaHosts } from "../../support/schema-hosts.js";
import { until } from "../../support/until.js";

/**
 * Two hosts on one PostgreSQL schema: a dismissal or restore alice makes through one host is told
 * (`session.dismissed`) to each of her sockets on the other, once per change, with its state and
 * the session's row, and to nobody else there (bob, an admin).
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const peer = peersCleanedBy(cleanups);

async function twoHosts(): Promise<{ near: RunningHost; far: RunningHost }> {
  const { start } = schemaHosts(pgUrl, "dismissal_across", TEST_TOKENS, cleanups);
  const near = await start("host-near");
  return { near, far: await start("host-far") };
}

const dismissedFrames = (peer: MuxPeer, sessionId: string) =>
  peer
    .notifications()
    .filter(
      (f) => f.name === "session.dismissed" && (f.value as { sessionId: string }).sessionId === sessionId,
    )
    .map((f) => f.value as { dismissed: boolean; row: SessionRow });

describe("session.dismissed across hosts (postgres)", () => {
  it.skipIf(!pgUrl)(
    "a dismissal and a restore made through one host reach the principal's sockets on the other, once each, and nobody else",
    async () => {
      const { near, far } = await twoHosts();
      const alice = await peer(near, ALICE_TOKEN);
      const aliceFar = [await peer(far, ALICE_TOKEN), await peer(far, ALICE_TOKEN)];
      const bobFar = await peer(far, BOB_TOKEN);
      const adminFar = await peer(far, ADMIN_TOKEN);
      const { header } = await alice.call<{ header: { sessionId: string } }>("session.create", {
        title: "first",
      });
      const sessionId = header.sessionId;
      // the far host has heard of the session (its list notifications reach the tabs)
      await alice.call("session.rename", { sessionId, title: "named" });
      for (const tab of aliceFar)
        await until(
          () =>
            tab
              .notifications()
              .some(
                (f) =>
                  f.name === "session.updated" &&
                  (f.value as { row: SessionRow }).row.sessionId === sessionId &&
                  (f.value as { row: SessionRow }).row.title === "named",
              ) || undefined,
          10_000,
          "rename heard on the far host",
        );

      await alice.call("session.dismiss", { sessionId });
      for (const tab of aliceFar)
        await until(() => dismissedFrames(tab, sessionId).length === 1 || undefined, 10_000, "dismissed");
      await alice.call("session.restore", { sessionId });
      await alice.call("session.restore", { sessionId }); // changes nothing: tells nothing
      await alice.call("session.dismiss", { sessionId });
      for (const tab of aliceFar)
        await until(() => dismissedFrames(tab, sessionId).length === 3 || undefined, 10_000, "again");
      // a commit after them, heard on the far host after anything they could have sent
      await alice.call("session.rename", { sessionId, title: "last" });
      await until(
        () =>
          bobFar.notifications().length === 0 &&
          adminFar
            .notifications()
            .some(
              (f) => f.name === "session.updated" && (f.value as { row: SessionRow }).row.title === "last",
            )
            ? true
            : undefined,
        10_000,
        "rename heard by the admin",
      );
      await new Promise((resolve) => setTimeout(resolve, 300));

      for (const tab of aliceFar) {
        const frames = dismissedFrames(tab, sessionId);
        expect(frames.map((f) => f.dismissed)).toEqual([true, false, true]);
        expect(frames[0]!.row).toMatchObject({ sessionId, title: "named" });
      }
      expect(dismissedFrames(alice, sessionId).map((f) => f.dismissed)).toEqual([true, false, true]);
      expect(bobFar.notifications()).toEqual([]);
      expect(dismissedFrames(adminFar, sessionId)).toEqual([]);
      // what the far host lists for alice agrees with what it told her
      const listed = await aliceFar[0]!.call<{ sessions: SessionRow[] }>("session.list", { dismissed: true });
      expect(listed.sessions.map((s) => s.sessionId)).toEqual([sessionId]);
    },
    60_000,
  );
});
