import { describe, expect, it } from "vitest";
import type { Notification } from "../../protocol/index.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { ALICE, type ClusterHost, pgUrl, prompt, turnEnd } from "./multi-host-fixture.js";
import { openOutageCluster } from "./outage-cluster.js";

/**
 * §6 with several hosts: a turn that fails on its owner is announced as `agent.error` to the
 * sockets of every host, a host whose LISTEN connection was down included, once it is back in:
 * also of a session it had delivered nothing of (created meanwhile), whose catch-up reads only its
 * row. A failure it had told, or one older than its listening, is not told again.
 */

async function create(host: ClusterHost): Promise<string> {
  return (await host.host.call(ALICE, "session.create", {})).header.sessionId;
}

/** Runs a turn that fails on `host` (the session's owner) and waits for its `turn/end`. */
async function failTurn(host: ClusterHost, sessionId: string): Promise<void> {
  const started = await host.host.call(ALICE, "session.prompt", { sessionId, ...prompt("/fail") });
  expect(await turnEnd(host.store, sessionId, started.turnId!)).toBe("failed");
}

describe.skipIf(!pgUrl)(
  "agent.error of a turn that failed on another host while this one's LISTEN connection was down",
  () => {
    const cleanups = cleanupsAfterEach();

    it("is told once it is back, once, and a failure told before or older than its listening is not told again", async () => {
      // host-b connects as a role the test can refuse
      const { cluster, ...refusable } = await openOutageCluster(cleanups, "smx_errors");
      const a = cluster.hosts[0]!;
      // failed before host-b started: host-b never delivers anything of it
      const old = await create(a);
      await failTurn(a, old);
      await refusable.runningEnded();
      const b = await cluster.addHost();
      const onB: string[] = [];
      b.host.subscribeNotifications(ALICE, (n: Notification) => {
        if (n.name === "session.added") onB.push(`added ${n.value.row.sessionId}`);
        if (n.name === "agent.error") onB.push(`error ${n.value.sessionId}: ${n.value.message}`);
      });

      // failed while host-b listened: told live
      const heard = await create(a);
      await failTurn(a, heard);
      const before = [`added ${heard}`, `error ${heard}: demo failure requested with /fail`];
      await expect.poll(() => onB, { timeout: 10_000 }).toEqual(before);

      await refusable.lockOut();
      const born = await create(a);
      await failTurn(a, born);
      // their rows are written while host-b is out; their failures are no news
      await a.host.call(ALICE, "session.rename", { sessionId: old, title: "renamed while b was out" });
      await a.host.call(ALICE, "session.rename", { sessionId: heard, title: "renamed while b was out" });
      // a fork copies a failure: no news either (as when heard live)
      const forked = (await a.host.call(ALICE, "session.fork", { sourceId: born })).header.sessionId;
      await refusable.letIn();

      const outage = [`added ${born}`, `error ${born}: demo failure requested with /fail`, `added ${forked}`];
      await expect.poll(() => onB.slice(before.length).sort(), { timeout: 20_000 }).toEqual(outage.sort());
      // the session's addition came before its failure
      expect(onB.indexOf(`added ${born}`)).toBeLessThan(
        onB.indexOf(`error ${born}: demo failure requested with /fail`),
      );
      // one more failure, heard live: the catch-up was over before it, and told each failure once
      const after = await create(a);
      await failTurn(a, after);
      await expect
        .poll(() => onB.slice(before.length + outage.length), { timeout: 20_000 })
        .toEqual([`added ${after}`, `error ${after}: demo failure requested with /fail`]);
      expect(onB.slice(0, before.length)).toEqual(before);
      expect(onB.slice(before.length, before.length + outage.length).sort()).toEqual(outage.sort());
    });
  },
);
