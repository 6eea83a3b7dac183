import { defineConfig } from "vitest/config";

/**
 * The suite StrykerJS runs against each mutant (`npm run test:mutation`): in-process tests only.
 * Tests that drive a child process (a real `sessionmux serve`, the CLI, a browser) run code the
 * mutant switch never reaches, and are the slowest; the torture suite is its own run.
 */
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: [
      "node_modules/**",
      "test/torture/**",
      "test/web/**",
      "test/cli/**",
      "test/store/kill-durability.test.ts",
      "test/store/fsync-before-ack.test.ts",
      "test/client/follow-over-cuts.test.ts",
      "test/client/host-restart.test.ts",
    ],
    pool: "forks",
    setupFiles: ["test/support/listener-errors.setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: 1,
  },
});
