import { randomBytes } from "node:crypto";
import { afterEach, expect, vi } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { dropSchema, pgUrl } from "../contract/backends.js";

export interface TwoHosts {
  a: PostgresSessionStore;
  b: PostgresSessionStore;
  schema: string;
}

/**
 * Opens two stores (hosts) on one fresh schema per call; both are closed and the schema dropped
 * after the test that opened them (as `storeFixture` does for one store).
 */
export function twoHostsFixture(prefix: string): () => Promise<TwoHosts> {
  const opened: TwoHosts[] = [];
  afterEach(async () => {
    await Promise.all(
      opened.splice(0).map(async ({ a, b, schema }) => {
        await Promise.all([a.close(), b.close()]);
        await dropSchema(pgUrl!, schema);
      }),
    );
  });
  return async () => {
    const schema = `${prefix}_${randomBytes(6).toString("hex")}`;
    const a = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
    const b = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
    const hosts = { a, b, schema };
    opened.push(hosts);
    return hosts;
  };
}

/** `twoHostsFixture` with session `sessionId` (owner `alice`) created on the first host. */
export function twoHostsWithSession(prefix: string, sessionId: string): () => Promise<TwoHosts> {
  const open = twoHostsFixture(prefix);
  return async () => {
    const hosts = await open();
    await hosts.a.create({ sessionId, owner: "alice", model: "m" });
    return hosts;
  };
}

let probes = 0;

/**
 * Resolves once B handled every NOTIFY A sent before the call: B handles them in order, so once
 * it delivered a session A creates now, it had handled the earlier ones.
 */
export async function notifiesHandled({ a, b }: Pick<TwoHosts, "a" | "b">): Promise<void> {
  const probe = `probe-${++probes}`;
  const heard: CommitNotice["kind"][] = [];
  const leave = b.subscribe(probe, (notice) => heard.push(notice.kind));
  await a.create({ sessionId: probe, owner: "o", model: "m" });
  await vi.waitFor(() => expect(heard).toEqual(["create"]), { timeout: 20_000 });
  leave();
}
