import { afterEach } from "vitest";
import { MuxPeer } from "../support/mux-peer.js";
import { CLUSTER_TOKEN, type Cluster, startCluster } from "./cluster.js";

/** One cluster per test and the raw peers connected to it, all torn down after each test. */
export function clusterFixture(pgUrl: string | null | undefined): {
  start(options?: Parameters<typeof startCluster>[1]): Promise<Cluster>;
  peer(wsUrl: string): Promise<MuxPeer>;
} {
  let cluster: Cluster | undefined;
  const peers: MuxPeer[] = [];
  afterEach(async () => {
    for (const peer of peers.splice(0)) peer.ws.terminate();
    await cluster?.dispose();
    cluster = undefined;
  });
  return {
    async start(options) {
      if (!pgUrl) throw new Error("no PostgreSQL to start a cluster on");
      cluster = await startCluster(pgUrl, options);
      return cluster;
    },
    async peer(wsUrl) {
      const connected = await MuxPeer.connect(wsUrl, { token: CLUSTER_TOKEN });
      peers.push(connected);
      return connected;
    },
  };
}
