import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["test/torture/**", "node_modules/**"],
    globalSetup: ["test/support/postgres-global-setup.ts"],
    pool: "forks",
    setupFiles: ["test/support/listener-errors.setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // polls wait for state, never for time: a noisy 2-core machine needs more than the 1 s default
    expect: { poll: { timeout: 15_000 } },
    fileParallelism: true,
    maxWorkers: 2,
  },
});
