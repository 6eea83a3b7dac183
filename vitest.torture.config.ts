import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/torture/**/*.test.ts"],
    // scenarios on several hosts need PostgreSQL; without it they are skipped and the run says so
    globalSetup: ["test/support/postgres-global-setup.ts"],
    pool: "forks",
    setupFiles: ["test/support/listener-errors.setup.ts"],
    // One scenario at a time: each one loads both cores on its own.
    fileParallelism: false,
    maxWorkers: 1,
    testTimeout: 600_000,
    hookTimeout: 120_000,
    expect: { poll: { timeout: 15_000 } },
  },
});
