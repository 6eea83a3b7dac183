import { once } from "node:events";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Cleanup } from "./cleanups.js";

/**
 * Listens with `server` on a free port of 127.0.0.1 and resolves with the port; after the test,
 * its connections are cut and it is closed (pushed on `cleanups`).
 */
export async function listenOnLoopback(server: Server, cleanups: Cleanup[]): Promise<number> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as AddressInfo).port;
}
