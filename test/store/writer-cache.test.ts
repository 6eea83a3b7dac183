import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { delta, openTempStore } from "./open-store.js";

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

/**
 * Opens a store keeping at most `cachedSessions` sessions, writes three, then changes their titles
 * behind its back with a connection of its own: a read answered from the writer's kept state still
 * shows the old title, one answered from the file the new one.
 */
async function titlesAfterThreeSessions(cachedSessions: number): Promise<(string | undefined)[]> {
  current = openTempStore({ cachedSessions });
  const { store, path } = current;
  for (const id of ["a", "b", "c"]) await store.create({ sessionId: id, owner: "o", model: "m", title: id });
  const probe = new Database(path);
  try {
    probe.prepare("UPDATE projections SET title = 'from the file'").run();
  } finally {
    probe.close();
  }
  // the next transaction trims what the writer keeps, if it holds more than its bound
  await store.append("a", [delta("t", "x")]);
  return Promise.all(["b", "c"].map(async (id) => (await store.projection(id))?.title));
}

describe("the SQLite writer's kept sessions", () => {
  it("are kept up to their bound", async () => {
    expect(await titlesAfterThreeSessions(3)).toEqual(["b", "c"]);
  });

  it("are all let go once past it, and reads then come from the file", async () => {
    expect(await titlesAfterThreeSessions(2)).toEqual(["from the file", "from the file"]);
  });
});
