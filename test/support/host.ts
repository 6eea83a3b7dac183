import type { AgentDriver } from "../../src/agents/agent.js";
import { type HostOptions, type RunningHost, startHost } from "../../src/server.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "./temp-dir.js";

export const ADMIN_TOKEN = "admin-secret-token";
export const ALICE_TOKEN = "alice-secret";
export const BOB_TOKEN = "bob-secret";

/** The tokens every test host takes: an admin, and alice and bob, who see only their own sessions. */
export const TEST_TOKENS = [
  { name: "admin", secret: ADMIN_TOKEN, admin: true },
  { name: "alice", secret: ALICE_TOKEN, admin: false },
  { name: "bob", secret: BOB_TOKEN, admin: false },
];

export interface TestHost extends RunningHost {
  readonly dbPath: string;
  /** A test host runs on SQLite: its store's fault switches are at hand. */
  readonly store: SqliteSessionStore;
  /** Closes the host and deletes its folder. */
  dispose(): Promise<void>;
}

/**
 * A real host on 127.0.0.1, port 0, with a real SQLite file in a temp folder.
 * Tokens: `TEST_TOKENS`.
 */
export async function startTestHost(
  options: Partial<HostOptions> & { agent?: AgentDriver; dbPath?: string } = {},
): Promise<TestHost> {
  const dir = options.dbPath ? undefined : tempDir();
  const dbPath = options.dbPath ?? dir!.file("sessions.db");
  const running = await startHost({
    port: 0,
    host: "127.0.0.1",
    tokens: TEST_TOKENS,
    ...options,
    dbPath,
  });
  if (!(running.store instanceof SqliteSessionStore)) throw new Error("a test host runs on SQLite");
  return Object.assign(Object.create(null) as object, running, {
    dbPath,
    close: running.close,
    async dispose() {
      await running.close();
      dir?.remove();
    },
  }) as TestHost;
}
