import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { SessionmuxOptions } from "../../src/embed/create-sessionmux.js";
import { createSessionmux } from "../../src/index.js";
import type { Cleanup } from "./cleanups.js";

/**
 * A host on `db` in this process, checking readiness every 50 ms (unless `options` says otherwise),
 * served on a port of 127.0.0.1, that nobody has written to; `cleanups` closes it.
 */
export async function readinessHost(
  db: string,
  cleanups: Cleanup[],
  options: Partial<SessionmuxOptions> = {},
): Promise<{ readyz: string; port: number }> {
  const mux = await createSessionmux({
    db,
    tokens: [{ name: "admin", secret: "s", admin: true }],
    readinessIntervalMs: 50,
    ...options,
  });
  cleanups.push(() => mux.close());
  const server = createServer();
  mux.attach(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as AddressInfo).port;
  return { readyz: `http://127.0.0.1:${port}/readyz`, port };
}
