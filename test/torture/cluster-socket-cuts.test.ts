import { afterEach, describe, expect, inject, it } from "vitest";
import { CLUSTER_TEST_TIMEOUT_MS, CLUSTER_TOKEN, type Cluster, startCluster } from "../cluster/cluster.js";
import { FollowWireCheck } from "../support/follow-wire-check.js";
import { checkHistory, isClean, sumCounts } from "../support/history-checker.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { until } from "../support/until.js";
import { SdkFollowers } from "./sdk-followers.js";
import { reportCounts, scaled } from "./torture-scale.js";

const FOLLOWERS = 12;
const SESSION = "moving";
const pgUrl = inject("pgUrl");

let cluster: Cluster | undefined;
let proxy: TcpProxy | undefined;
let followers: SdkFollowers | undefined;

afterEach(async () => {
  await followers?.close();
  followers = undefined;
  await proxy?.stop();
  await cluster?.dispose();
});

describe.skipIf(!pgUrl)(
  "torture: random socket cuts, every reconnection to a random one of three hosts",
  () => {
    it(
      "every follower ends with exactly 1..N through 200 cuts",
      async () => {
        const cuts = scaled(200);
        cluster = await startCluster(pgUrl!);
        const ports = cluster.hosts.map((host) => host.port);
        const landed = new Map<number, number>();
        const wire = new FollowWireCheck();
        // a load balancer without stickiness: each new connection goes to any host
        proxy = await startTcpProxy(
          () => {
            const port = ports[Math.floor(Math.random() * ports.length)]!;
            landed.set(port, (landed.get(port) ?? 0) + 1);
            return port;
          },
          { tap: () => wire.connection() },
        );
        // commits come from a fourth writer on the same schema: every host learns of them by NOTIFY
        const writerStore = cluster.reader;
        const created = await writerStore.create({ sessionId: SESSION, owner: "admin", model: "demo" });
        expect(created.status).toBe("created");
        const acked = [1];
        const url = `ws://127.0.0.1:${proxy.port}/api/remote.mux`;
        followers = new SdkFollowers(url, CLUSTER_TOKEN, SESSION, FOLLOWERS);
        const { observed, failures } = followers;

        // Each cut waits until half the followers have reopened their streams (on whichever host
        // they landed), then 10–80 ms more: three hosts on two loaded cores upgrade slowly, and a
        // cut that only ever hits half-open sockets would prove nothing about streams in flight.
        let cutting = true;
        const liveProxy = proxy;
        const cutsDone = (async () => {
          for (let i = 0; i < cuts; i++) {
            const opened = wire.streams;
            await until(
              () => wire.streams >= opened + FOLLOWERS / 2,
              60_000,
              `streams reopened before cut ${i}`,
            );
            await new Promise((resolve) => setTimeout(resolve, 10 + Math.random() * 70));
            liveProxy.cutAll();
          }
        })().finally(() => {
          cutting = false;
        });
        const writer = (async () => {
          const stopAt = Date.now() + 180_000;
          while (cutting && Date.now() < stopAt) {
            const outcome = await writerStore.append(
              SESSION,
              Array.from({ length: 5 }, (_, i) => ({
                type: "assistant/delta" as const,
                data: { turnId: "t", text: `x${i}` },
              })),
            );
            if (outcome.status !== "appended") throw new Error(outcome.status);
            for (const event of outcome.events) acked.push(event.seq);
            await new Promise((resolve) => setTimeout(resolve, 2));
          }
        })();
        await Promise.all([cutsDone, writer]);
        const head = acked.at(-1)!;
        await until(() => observed.every((seqs) => seqs.at(-1) === head), 180_000, "followers catch up");

        const log = await cluster.logSeqs(SESSION);
        const reports = observed.map((seqs) => checkHistory({ acknowledged: acked, log, observed: seqs }));
        const total = sumCounts(reports);
        reportCounts("cluster-socket-cuts", cuts, { ...total, acked: acked.length });
        expect(failures).toEqual([]);
        expect(proxy.cuts).toBe(cuts);
        expect(proxy.accepted).toBeGreaterThan(cuts);
        // the sockets did move: every host took connections
        expect([...landed.keys()].sort()).toEqual([...ports].sort());
        expect(isClean(total)).toBe(true);
        for (const seqs of observed) expect(seqs.length).toBe(head);
        expect(wire.violations).toEqual([]);
        expect(wire.streams).toBeGreaterThanOrEqual((cuts * FOLLOWERS) / 2);
        expect(wire.events).toBeGreaterThanOrEqual(FOLLOWERS * head);
      },
      CLUSTER_TEST_TIMEOUT_MS,
    );
  },
);
