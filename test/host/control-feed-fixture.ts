import { afterEach } from "vitest";
import { ControlFeed } from "../../src/host/control-feed.js";
import { LiveRegistry } from "../../src/host/live/live-registry.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";

// The feed on a real store and a real live registry; no job runs here, so nothing records one.
export const noJobs = { append: async () => undefined, progress: async () => undefined };

/** Each test's own store (and the control feed on it), closed and removed after the test. */
export function controlFeedFixture() {
  let dir: ReturnType<typeof tempDir> | undefined;
  let store: SqliteSessionStore | undefined;
  afterEach(async () => {
    await store?.close();
    dir?.remove();
    store = undefined;
    dir = undefined;
  });
  const openStore = (): SqliteSessionStore => {
    dir = tempDir();
    store = SqliteSessionStore.open(dir.file("sessions.db"));
    return store;
  };
  return {
    openStore,
    /** A started feed on a fresh store and live registry. */
    openFeed(): { feed: ControlFeed; registry: LiveRegistry; store: SqliteSessionStore } {
      const opened = openStore();
      const registry = new LiveRegistry(noJobs);
      const feed = new ControlFeed(opened, registry, "g1");
      feed.start();
      return { feed, registry, store: opened };
    },
  };
}
