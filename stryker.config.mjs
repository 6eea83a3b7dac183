/**
 * Mutation testing (not in CI: too slow for 2 cores). One module at a time:
 *   npm run test:mutation -- --mutate src/store/group-commit.ts
 * Without --mutate it runs on every module that carries a promise of docs/reliability.md.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutation.config.ts", related: true },
  coverageAnalysis: "perTest",
  checkers: [],
  mutate: [
    "src/transport/mux/follow-stream.ts",
    "src/transport/mux/control-stream.ts",
    "src/transport/mux/frame-writer.ts",
    "src/store/group-commit.ts",
    "src/store/commit-listeners.ts",
    "src/store/write-operations.ts",
    "src/store/log-writer.ts",
    "src/store/sqlite-log-store.ts",
    "src/host/activation-policy.ts",
    "src/host/turn-runner.ts",
    "src/host/turn-context.ts",
    "src/host/call-router.ts",
    "src/host/host-cluster.ts",
    "src/host/agent-registry.ts",
    "src/host/live/interaction-registry.ts",
    "src/host/live/prompt-queue.ts",
    "src/host/live/live-registry.ts",
    "src/host/live/remote-agents.ts",
    "src/host/live/agent-status.ts",
    "src/host/live/job-registry.ts",
    "src/client/follow-cursor.ts",
    "src/client/stream-supervisor.ts",
    "src/client/connection.ts",
    "src/client/connection-state.ts",
  ],
  ignorePatterns: ["dist", "data", "reports", "bench/results", "test-results", "web/dist"],
  reporters: ["clear-text", "progress", "json"],
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  concurrency: 1,
  timeoutMS: 10_000,
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
};
