import { describe, expect, test } from "vitest";
import { DemoAgent } from "../../../src/agents/demo-agent.js";
import type { Principal } from "../../../src/host/principal.js";
import { SessionHost } from "../../../src/host/session-host.js";
import { SqliteSessionStore } from "../../../src/store/sqlite-store.js";
import { SessionListCache } from "../../../src/transport/http/session-list-cache.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { tempDir } from "../../support/temp-dir.js";

/** The encoded session lists, kept until any commit of a real host on a real SQLite file. */

const ALICE: Principal = { name: "alice", admin: false };
const cleanups = cleanupsAfterEach();

async function open(capacity?: number) {
  const dir = tempDir();
  const store = SqliteSessionStore.open(dir.file("sessions.db"));
  const host = new SessionHost({ store, agent: new DemoAgent() });
  await host.start();
  cleanups.push(async () => {
    await host.shutdown();
    await store.close();
    dir.remove();
  });
  const cache = new SessionListCache(host, capacity);
  const computed: string[] = [];
  /** The cached list under `key`, computing `key@n` (n: how often it was computed) on a miss. */
  const get = (key: string, during?: () => Promise<unknown>) =>
    cache
      .get(ALICE, key, async () => {
        computed.push(key);
        await during?.();
        return Buffer.from(`${key}@${computed.filter((k) => k === key).length}`);
      })
      .then(String);
  return { host, get, computed };
}

describe("session list cache", () => {
  test("a list read while a commit landed is answered but not kept", async () => {
    const { host, get } = await open();
    await host.call(ALICE, "session.create", { sessionId: "s" });
    const rename = () => host.call(ALICE, "session.rename", { sessionId: "s", title: "t" });
    expect(await get("k", rename)).toBe("k@1");
    expect(await get("k")).toBe("k@2");
    expect(await get("k")).toBe("k@2");
  });

  test("keeps a principal's lists under each key until capacity, then starts over", async () => {
    const { get } = await open(2);
    expect(await get("a")).toBe("a@1");
    expect(await get("b")).toBe("b@1");
    // both kept, under one principal
    expect(await get("a")).toBe("a@1");
    expect(await get("b")).toBe("b@1");
    // a third at capacity drops the others
    expect(await get("c")).toBe("c@1");
    expect(await get("c")).toBe("c@1");
    expect(await get("a")).toBe("a@2");
  });

  test("a key read twice at once counts once against capacity", async () => {
    const { get, computed } = await open(3);
    await Promise.all([get("a"), get("a")]);
    expect(computed).toEqual(["a", "a"]);
    await get("b");
    // two keys held of three: a third is kept beside them
    await get("c");
    expect(await get("a")).toBe("a@2");
    expect(await get("b")).toBe("b@1");
  });
});
