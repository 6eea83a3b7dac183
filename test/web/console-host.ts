import { afterAll, beforeAll } from "vitest";
import type { HostOptions } from "../../src/server.js";
import { type TestHostFixture, useTestHost } from "../support/use-test-host.js";
import { buildConsole } from "./console-build.js";

/**
 * Builds the console and starts a host serving it (with `options`) before the file's tests, with
 * an admin client to seed sessions and read logs; stops both after.
 */
export function useConsoleHost(options: Partial<HostOptions> = {}): TestHostFixture {
  let webRoot: string | undefined;
  let removeBuild: (() => void) | undefined;
  // registered before the host's: the build is made before the host starts, removed after it stops
  beforeAll(async () => {
    const built = await buildConsole();
    webRoot = built.webRoot;
    removeBuild = built.remove;
  });
  afterAll(() => removeBuild?.());
  return useTestHost(() => ({ ...options, http: { ...options.http, webRoot } }));
}
