import { statSync } from "node:fs";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { openTempStore } from "./open-store.js";

/**
 * The store's record of whether its writes fail on storage, which `/readyz` answers from, and the
 * write of its own that tells it storage has room again.
 */

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

const rename = (title: string) => current!.store.append("s", [{ type: "session/renamed", data: { title } }]);

describe("the store's write health", () => {
  it("fails from the first write storage refuses until the next one that commits", async () => {
    current = openTempStore();
    const { store, path } = current;
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    expect(store.writeFailure()).toBeUndefined();

    store.limitSize(statSync(path).size);
    // renames fill the capped file within a few hundred appends
    let refused: unknown;
    for (let i = 0; i < 500 && refused === undefined; i++) {
      await rename(`${i} ${"x".repeat(400)}`).catch((err: unknown) => {
        refused = err;
      });
    }
    expect(refused).toBeInstanceOf(SessionmuxError);
    expect((refused as SessionmuxError).code).toBe("persistence_failure");
    const failure = store.writeFailure();
    expect(failure?.code).toBe("SQLITE_FULL");
    await expect(store.probeStorage()).rejects.toMatchObject({ code: "persistence_failure" });
    expect(store.writeFailure()?.since).toBe(failure?.since);

    store.limitSize(null);
    await store.probeStorage();
    expect(store.writeFailure()).toBeUndefined();
    expect((await rename("back")).status).toBe("appended");
  });

  it("a write that commits clears it, and the probe leaves no row behind", async () => {
    current = openTempStore();
    const { store, path } = current;
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    store.refuseWrites(true);
    await expect(rename("refused")).rejects.toMatchObject({ code: "persistence_failure" });
    expect(store.writeFailure()?.code).toBe("SQLITE_READONLY");
    store.refuseWrites(false);
    expect((await rename("written")).status).toBe("appended");
    expect(store.writeFailure()).toBeUndefined();

    await store.probeStorage();
    const reader = new Database(path, { readonly: true });
    try {
      expect(reader.prepare("SELECT count(*) AS n FROM prompt_keys").get()).toEqual({ n: 0 });
      expect(reader.pragma("integrity_check", { simple: true })).toBe("ok");
    } finally {
      reader.close();
    }
  });
});
