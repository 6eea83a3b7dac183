import { describe, expect, it } from "vitest";
import type { Notification } from "../../protocol/index.js";
import type { Principal } from "../../src/host/principal.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { ALICE, type ClusterHost, pgUrl } from "./multi-host-fixture.js";
import { openOutageCluster } from "./outage-cluster.js";

/**
 * §6 with several hosts: a host whose LISTEN connection was down heard none of the NOTIFYs of
 * that time. Once back, its sockets get the list changes the other hosts made meanwhile as the
 * NOTIFYs would have told them: `session.added` for a session created or forked there,
 * `session.removed` for one deleted there, each once, and only to those who may see it.
 */

const BOB: Principal = { name: "bob", admin: false };

/** The list notifications `principal`'s sockets on `host` get, as `added <id>`, `removed <id>`, `updated <id>`. */
function listNotices(host: ClusterHost, principal: Principal): string[] {
  const heard: string[] = [];
  host.host.subscribeNotifications(principal, (n: Notification) => {
    if (n.name === "session.added") heard.push(`added ${n.value.row.sessionId}`);
    if (n.name === "session.removed") heard.push(`removed ${n.value.sessionId}`);
    if (n.name === "session.updated") heard.push(`updated ${n.value.row.sessionId}`);
  });
  return heard;
}

async function create(host: ClusterHost, principal: Principal): Promise<string> {
  return (await host.host.call(principal, "session.create", {})).header.sessionId;
}

describe.skipIf(!pgUrl)(
  "list notifications of what another host did while this one's LISTEN connection was down",
  () => {
    const cleanups = cleanupsAfterEach();

    it("are told once it is back: added for a create and a fork, removed for a delete, nothing of another principal's", async () => {
      // host-b connects as a role the test can refuse
      const { cluster, ...refusable } = await openOutageCluster(cleanups, "smx_lists");
      const a = cluster.hosts[0]!;
      // made before host-b started: host-b never delivers anything of it
      const old = await create(a, ALICE);
      await refusable.runningEnded();
      const b = await cluster.addHost();
      const aliceOnB = listNotices(b, ALICE);
      const bobOnB = listNotices(b, BOB);

      // heard live by host-b before the outage
      const kept = await create(a, ALICE);
      const doomed = await create(a, ALICE);
      const bobsDoomed = await create(a, BOB);
      await expect.poll(() => aliceOnB.length + bobOnB.length, { timeout: 10_000 }).toBe(3);
      aliceOnB.length = 0;
      bobOnB.length = 0;

      await refusable.lockOut();
      const born = await create(a, ALICE);
      const forked = (await a.host.call(ALICE, "session.fork", { sourceId: born })).header.sessionId;
      await a.host.call(ALICE, "session.delete", { sessionId: doomed });
      await a.host.call(ALICE, "session.delete", { sessionId: old });
      await a.host.call(ALICE, "session.rename", { sessionId: kept, title: "renamed while b was out" });
      const bobsBorn = await create(a, BOB);
      await a.host.call(BOB, "session.delete", { sessionId: bobsDoomed });
      await refusable.letIn();

      const alices = [
        `added ${born}`,
        `added ${forked}`,
        `removed ${doomed}`,
        `removed ${old}`,
        `updated ${kept}`,
      ].sort();
      const bobs = [`added ${bobsBorn}`, `removed ${bobsDoomed}`].sort();
      await expect.poll(() => [...aliceOnB].sort(), { timeout: 20_000 }).toEqual(alices);
      await expect.poll(() => [...bobOnB].sort(), { timeout: 20_000 }).toEqual(bobs);
      // one more create, heard live: the catch-up was over before it, and told each change once
      const after = await create(a, ALICE);
      await expect.poll(() => aliceOnB.length, { timeout: 20_000 }).toBe(alices.length + 1);
      expect(aliceOnB.slice(0, -1).sort()).toEqual(alices);
      expect(aliceOnB.at(-1)).toBe(`added ${after}`);
      expect([...bobOnB].sort()).toEqual(bobs);
    });
  },
);
