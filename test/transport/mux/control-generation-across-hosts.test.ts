import { describe, expect, inject, it } from "vitest";
import { type RunningHost, startHost } from "../../../src/server.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { MuxPeer } from "../../support/mux-peer.js";
import { schemaHosts } from "../../support/schema-hosts.js";
import { tempDir } from "../../support/temp-dir.js";

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const ALICE = "alice-secret";
const tokens = [{ name: "alice", secret: ALICE, admin: false }];

/** The hello's generation and the control baseline's, read on a socket of its own. */
async function generations(host: RunningHost): Promise<{ hello: string; baseline: string }> {
  const peer = await MuxPeer.connect(host.wsUrl, { token: ALICE });
  try {
    const id = peer.open("session.control");
    const baseline = await peer.waitItem<{ kind: string; generation: string }>(
      id,
      (i) => i.kind === "baseline",
    );
    return { hello: String(peer.hello.generation), baseline: baseline.generation };
  } finally {
    peer.ws.terminate();
  }
}

/**
 * §5 control: the baseline's `generation` tells a client the live state it mirrors was rebuilt.
 * On one host that is a restart of its process; on a database shared by several hosts the live
 * state is the store's, so every host's baseline carries the same generation and a socket moving
 * between hosts (a balancer with no stickiness) is not told of a restart.
 */
describe("the control baseline's generation", () => {
  it.skipIf(!pgUrl)(
    "is the same on every host of one PostgreSQL schema, and across their restarts",
    async () => {
      const { start } = schemaHosts(pgUrl, "ctl_gen", tokens, cleanups);
      const a = await start("host-a");
      const b = await start("host-b");
      const onA = await generations(a);
      const onB = await generations(b);
      // each process has its own (the socket's), the live state one for both
      expect(onA.hello).not.toBe(onB.hello);
      expect(onB.baseline).toBe(onA.baseline);
      await a.close();
      const again = await generations(await start("host-a"));
      expect(again.hello).not.toBe(onA.hello);
      expect(again.baseline).toBe(onA.baseline);
    },
    60_000,
  );

  it("changes with a restart of a host on its own SQLite file", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const start = async () => {
      const host = await startHost({ port: 0, dbPath: dir.file("sessions.db"), tokens });
      cleanups.push(() => host.close());
      return host;
    };
    const first = await start();
    const before = await generations(first);
    expect(before.baseline).toBe(before.hello);
    await first.close();
    const after = await generations(await start());
    expect(after.baseline).not.toBe(before.baseline);
  }, 60_000);
});
