import { randomBytes } from "node:crypto";
import { describe, expect, inject, it, vi } from "vitest";
import { startHost } from "../../../src/server.js";
import { dropSchema } from "../../store/contract/backends.js";
import { peersCleanedBy } from "../../support/cleaned-peer.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { ALICE_TOKEN, TEST_TOKENS } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";
import { until } from "../../support/until.js";

/**
 * A follow stream on a host whose database connection drops while the stream opens or reads the
 * log: the read fails `persistence_failure`, and the stream waits and reads again from the same
 * cursor once the database answers, rather than ending (a client takes that error as the end of
 * the stream). A commit another host made meanwhile reaches the follower once, in order.
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const peer = peersCleanedBy(cleanups);
const ALICE = { name: "alice", admin: false };
/** Text only the follow stream's log read sends (the hex-encoded events it splices into frames). */
const FOLLOW_READ = Buffer.from("encode(e.data, 'hex') AS data");

/**
 * Two hosts on one schema, `behindProxy` reaching the database through `proxy` (whose `tap`, if
 * given, sees what that host sends), `direct` without it; session `s` holds seq 1 to 3 (made on
 * `direct`), and `follower` is a socket of alice's on `behindProxy`.
 */
async function hostsOnOneSchema(fromClient?: (chunk: Buffer) => void) {
  const url = new URL(pgUrl);
  const schema = `follow_read_retry_${randomBytes(4).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl, schema));
  const tap = fromClient && (() => ({ fromClient, fromHost() {} }));
  const proxy = await startTcpProxy(Number(url.port || 5432), tap ? { tap } : {});
  cleanups.push(() => proxy.stop());
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  const start = async (hostId: string, dbPath: string) => {
    const host = await startHost({
      port: 0,
      host: "127.0.0.1",
      dbPath,
      dbSchema: schema,
      dbPoolSize: 2,
      hostId,
      tokens: TEST_TOKENS,
    });
    cleanups.push(() => host.close());
    return host;
  };
  const direct = await start("host-b", pgUrl);
  const behindProxy = await start("host-a", url.toString());
  await direct.host.call(ALICE, "session.create", { sessionId: "s", title: "t0" });
  await direct.host.call(ALICE, "session.rename", { sessionId: "s", title: "t1" });
  await direct.host.call(ALICE, "session.rename", { sessionId: "s", title: "t2" });
  const follower = await peer(behindProxy, ALICE_TOKEN);
  return { proxy, direct, behindProxy, follower };
}

/**
 * Once the database answers again: the follower gets seq 1 to 4 once each, in order, with
 * `opened` and `caughtUp` around them and its stream still open; then a live push of seq 5.
 */
async function followsOn(
  follower: MuxPeer,
  id: number,
  direct: Awaited<ReturnType<typeof hostsOnOneSchema>>["direct"],
): Promise<void> {
  await until(
    () => follower.lastSeq(id) >= 4 || follower.terminal(id) !== undefined || undefined,
    30_000,
    "seq 4 or the stream's end",
  );
  expect(follower.terminal(id)).toBeUndefined();
  expect(follower.events(id).map((e) => e.seq)).toEqual([1, 2, 3, 4]);
  const kinds = follower.items<{ kind: string }>(id).map((i) => i.kind);
  expect(kinds.filter((kind) => kind !== "events")).toEqual(["opened", "caughtUp"]);
  expect(follower.violations).toEqual([]);

  // live again: the next commit is pushed
  await direct.host.call(ALICE, "session.rename", { sessionId: "s", title: "t4" });
  await follower.waitSeq(id, 5);
  expect(follower.events(id).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
  expect(follower.terminal(id)).toBeUndefined();
}

describe.skipIf(!pgUrl)("a follow stream whose log read loses the database connection", () => {
  it("waits for the database and goes on from its cursor: every event once, in order, the stream still open", async () => {
    // armed: the next follow read sent cuts every connection, and new ones are refused
    let armed = false;
    let cut = false;
    let proxy: TcpProxy | undefined;
    const hosts = await hostsOnOneSchema((chunk) => {
      if (!armed || !chunk.includes(FOLLOW_READ)) return;
      armed = false;
      proxy?.refuseNew(true);
      proxy?.cutAll();
      cut = true;
    });
    proxy = hosts.proxy;
    const { direct, follower } = hosts;

    armed = true;
    const id = follower.follow("s");
    await until(() => cut || undefined, 10_000, "the follow read cut off");
    const refusedFrom = proxy.accepted;
    // the host tried to reconnect (and was refused) before the other host commits
    await until(() => proxy.accepted > refusedFrom || undefined, 10_000, "a refused reconnect");
    await direct.host.call(ALICE, "session.rename", { sessionId: "s", title: "t3" });
    proxy.refuseNew(false);

    await followsOn(follower, id, direct);
  }, 60_000);

  it("opened while the database is away, waits for it and follows from the start: every event once, in order", async () => {
    const { proxy, direct, behindProxy, follower } = await hostsOnOneSchema();
    // the opens of the session that failed (the host's own, watched, not changed)
    const failedOpens: string[] = [];
    const openRead = behindProxy.host.openRead.bind(behindProxy.host);
    const spy = vi.spyOn(behindProxy.host, "openRead").mockImplementation((...args) =>
      openRead(...args).catch((err: unknown) => {
        failedOpens.push((err as { code?: string }).code ?? String(err));
        throw err;
      }),
    );
    cleanups.push(() => spy.mockRestore());

    // the database goes away before the follow is opened
    proxy.refuseNew(true);
    proxy.cutAll();
    const id = follower.follow("s");
    await until(() => failedOpens.length > 0 || undefined, 10_000, "a failed open");
    expect(failedOpens[0]).toBe("persistence_failure");
    await direct.host.call(ALICE, "session.rename", { sessionId: "s", title: "t3" });
    // open and quiet meanwhile: nothing sent, not ended
    expect(follower.items(id)).toEqual([]);
    expect(follower.terminal(id)).toBeUndefined();
    proxy.refuseNew(false);

    await followsOn(follower, id, direct);
    expect(failedOpens.every((code) => code === "persistence_failure")).toBe(true);
  }, 60_000);
});
