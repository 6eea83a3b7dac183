import { defineConfig } from "vitest/config";

/**
 * The suite StrykerJS runs against each mutant (`npm run test:mutation`): in-process tests only.
 * Tests that drive a child process (a real `sessionmux serve`, the CLI, a browser) run code the
 * mutant switch never reaches, and are the slowest; the torture suite is its own run.
 * `MUTATION_TESTS` (comma-separated globs) narrows the suite to a module's own tests, e.g.
 * `MUTATION_TESTS='test/store/**' npm run test:mutation -- --mutate src/store/group-commit.ts`.
 */
export default defineConfig({
  test: {
    include: process.env.MUTATION_TESTS?.split(",").map((glob) =>
      glob.endsWith(".ts") ? glob : `${glob}/*.test.ts`,
    ) ?? ["test/**/*.test.ts"],
    exclude: [
      "node_modules/**",
      "test/torture/**",
      "test/web/**",
      // the CLI's tests that drive a child process; its in-process ones (limit and option parsing) run
      "test/cli/backup-*.test.ts",
      "test/cli/client-*.test.ts",
      "test/cli/option-values.test.ts",
      "test/cli/postgres-*.test.ts",
      "test/cli/rebuild-command.test.ts",
      "test/cli/redacted-url.test.ts",
      "test/cli/serve-operations.test.ts",
      "test/cli/token-rotate-durable.test.ts",
      "test/store/kill-durability.test.ts",
      "test/store/fsync-before-ack.test.ts",
      "test/client/follow-over-cuts.test.ts",
      "test/client/host-restart.test.ts",
    ],
    // the PostgreSQL half of the store contract, for the modules of src/store/postgres
    globalSetup: ["test/support/postgres-global-setup.ts"],
    pool: "forks",
    setupFiles: ["test/support/listener-errors.setup.ts"],
    // A mutant that makes a write never settle must fail fast, not hold the run for a minute.
    testTimeout: 8_000,
    hookTimeout: 8_000,
    maxWorkers: 1,
  },
});
