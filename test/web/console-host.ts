import { afterAll, beforeAll } from "vitest";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import type { HostOptions } from "../../src/server.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { buildConsole } from "./console-build.js";

export interface ConsoleHost {
  /** A real host on 127.0.0.1 serving a fresh build of the console. */
  readonly host: TestHost;
  /** A Node client of that host with the admin token, to seed sessions and read logs. */
  readonly client: SessionmuxClient;
}

/**
 * Builds the console and starts a host serving it (with `options`) before the file's tests;
 * stops both after.
 */
export function useConsoleHost(options: Partial<HostOptions> = {}): ConsoleHost {
  let host: TestHost | undefined;
  let client: SessionmuxClient | undefined;
  let removeBuild: (() => void) | undefined;
  beforeAll(async () => {
    const built = await buildConsole();
    removeBuild = built.remove;
    host = await startTestHost({ ...options, http: { ...options.http, webRoot: built.webRoot } });
    client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
  });
  afterAll(async () => {
    await client?.close();
    await host?.dispose();
    removeBuild?.();
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
