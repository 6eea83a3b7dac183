import { afterAll, beforeAll } from "vitest";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "./cleanups.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "./host.js";

export interface TestHostFixture {
  /** A real host on 127.0.0.1 with a SQLite file of its own (`startTestHost`). */
  readonly host: TestHost;
  /** A Node client of that host with the admin token. */
  readonly client: SessionmuxClient;
}

type HostStart = NonNullable<Parameters<typeof startTestHost>[0]>;

/**
 * For the tests of a file (or of the `describe` it is called in) that share one host: starts it,
 * and a client of it with the admin token, before them; closes the client, then the host (its
 * folder removed), after them. `options` is read when the host starts, so it may use what an
 * earlier `beforeAll` made (a console build to serve).
 */
export function useTestHost(options: HostStart | (() => HostStart) = {}): TestHostFixture {
  let host: TestHost | undefined;
  let client: SessionmuxClient | undefined;
  beforeAll(async () => {
    host = await startTestHost(typeof options === "function" ? options() : options);
    client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
  });
  afterAll(async () => {
    await client?.close();
    await host?.dispose();
  });
  return {
    get host() {
      if (!host) throw new Error("the host starts in beforeAll");
      return host;
    },
    get client() {
      if (!client) throw new Error("the client connects in beforeAll");
      return client;
    },
  };
}

/**
 * For the tests of a file that each start a host of their own: the function returned starts one
 * with `options`, and a client of it with the admin token; after each test the client is closed,
 * then the host (its folder removed).
 */
export function hostPerTest(): (options?: HostStart) => Promise<TestHostFixture> {
  const cleanups = cleanupsAfterEach();
  return async (options = {}) => {
    const host = await startTestHost(options);
    cleanups.push(() => host.dispose());
    const client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
    cleanups.push(() => client.close());
    return { host, client };
  };
}
