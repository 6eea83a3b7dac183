import { randomBytes } from "node:crypto";
import { type HostOptions, type RunningHost, startHost } from "../../src/server.js";
import { dropSchema } from "../store/contract/backends.js";
import type { Cleanup } from "./cleanups.js";

/**
 * A host on a PostgreSQL schema of the test's own (`<prefix>_<random>`, dropped by `cleanups`
 * after its hosts closed): `start(hostId)` starts one more on it, on a port of 127.0.0.1, with
 * `options` besides (a console's `http.webRoot`, say).
 */
export function schemaHosts(
  pgUrl: string,
  prefix: string,
  tokens: { name: string; secret: string; admin: boolean }[],
  cleanups: Cleanup[],
  options: Partial<HostOptions> = {},
): { schema: string; start(hostId: string): Promise<RunningHost> } {
  const schema = `${prefix}_${randomBytes(4).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl, schema));
  return {
    schema,
    async start(hostId) {
      const host = await startHost({
        ...options,
        port: 0,
        host: "127.0.0.1",
        dbPath: pgUrl,
        dbSchema: schema,
        dbPoolSize: 2,
        hostId,
        tokens,
      });
      cleanups.push(() => host.close());
      return host;
    },
  };
}
