import { once } from "node:events";
import { type AddressInfo, createServer, type Socket } from "node:net";
import type { SessionmuxClient } from "../../src/client/client.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { startFakePeer } from "./fake-peer.js";

/**
 * What a client test opens, closed after each test in the reverse order it was opened: fake peers,
 * clients, and anything else pushed on `cleanups`.
 */
export function peerFixture() {
  const cleanups = cleanupsAfterEach();
  return {
    cleanups,
    async peer(options: Parameters<typeof startFakePeer>[0] = {}) {
      const p = await startFakePeer(options);
      cleanups.push(() => p.stop());
      return p;
    },
    track<C extends SessionmuxClient>(client: C): C {
      cleanups.push(() => client.close());
      return client;
    },
    /** A server on 127.0.0.1 that accepts TCP connections and never answers the upgrade request. */
    async silentUpgrades(): Promise<{ port: number; accepted: Socket[] }> {
      const accepted: Socket[] = [];
      const server = createServer((socket) => accepted.push(socket));
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      cleanups.push(async () => {
        for (const s of accepted) s.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      });
      return { port: (server.address() as AddressInfo).port, accepted };
    },
  };
}
