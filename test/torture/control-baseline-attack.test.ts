import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { AttackHost, Canary, mib, report } from "../support/attack-host.js";
import { ALICE_TOKEN } from "../support/host.js";
import { hostTeardown } from "../support/host-teardown.js";
import { MuxPeer } from "../support/mux-peer.js";
import { until } from "../support/until.js";

const MIB = 1024 * 1024;
const SESSIONS = 5_000;
/** `maxLiveAgentsPerPrincipal`'s default: older idle agents are detached to stay under it. */
const LIVE_AGENTS = 1_000;
/** `--max-streams-per-socket`'s default. */
const STREAMS = 256;
/** Sockets (and so calls at once, 4 each) the principal sets up its sessions with. */
const SETUP_SOCKETS = 16;
/**
 * What one socket that opens every control stream it may and never reads can make the host hold
 * (heap and Buffers after a full collection): the send backlog (4 MiB) plus the one baseline built
 * past it (about 0.23 MiB for 1,000 live sessions), with slack. Before baselines waited for the
 * backlog, all 256 were built and queued at once (about 60 MiB).
 */
const HELD_BOUND = 8 * MIB;

interface AttackerFrame {
  type: string;
  id?: number;
  value?: { kind: string; agents: unknown[]; projections: unknown[] };
  error?: { code: string };
}

const PEER_LIMITS = { maxStrBytes: 16 * MIB, maxArrayLength: 1_000_000, maxValues: 2 ** 25 };

const { peers, keep } = hostTeardown<AttackHost>();

/** `count` sessions of one principal, each prompted once (so each got a live agent in turn). */
async function promptedSessions(sockets: MuxPeer[], count: number): Promise<void> {
  let next = 0;
  await Promise.all(
    sockets.flatMap((peer) =>
      Array.from({ length: 4 }, async () => {
        for (let i = next++; i < count; i = next++) {
          const { header } = await peer.call<{ header: { sessionId: string } }>("session.create", {});
          await peer.call("session.prompt", {
            sessionId: header.sessionId,
            text: "hi",
            clientMessageId: `m${i}`,
          });
        }
      }),
    ),
  );
}

describe("control baselines over thousands of sessions (protocol-v1 §5, §7)", () => {
  it(`${STREAMS} session.control streams on one socket over ${SESSIONS} sessions: bounded, others served`, async () => {
    const host = keep(
      await AttackHost.start(["--token", `alice=${ALICE_TOKEN}`, "--session-create-burst", String(SESSIONS)]),
    );
    const setup = await Promise.all(
      Array.from({ length: SETUP_SOCKETS }, () => MuxPeer.connect(host.wsUrl, { token: ALICE_TOKEN })),
    );
    peers.push(...setup);
    await promptedSessions(setup, SESSIONS);
    const listed = await setup[0]!.call<{ sessions: unknown[] }>("session.list", { limit: 1 });
    expect(listed.sessions).toHaveLength(1);
    // Every turn has ended: the principal keeps at most its limit of agents, all idle.
    const probe = setup[1]!;
    await until(
      async () => {
        const id = probe.open("session.control");
        const baseline = await probe.waitItem<{ kind: string; agents: { state: string }[] }>(
          id,
          (i) => i.kind === "baseline",
          30_000,
        );
        probe.close(id);
        return baseline.agents.length === LIVE_AGENTS && baseline.agents.every((a) => a.state === "idle");
      },
      60_000,
      "the principal's agents settle at the limit, all idle",
    );
    for (const peer of setup.splice(2)) await peer.disconnect();

    const canary = await Canary.start(host);
    // The attacker keeps what it receives undecoded while measured: decoding 60 MB of baselines
    // would slow this process's own /healthz probes.
    const attacker = MuxPeer.socket(host.wsUrl, { token: ALICE_TOKEN });
    const received: Buffer[] = [];
    attacker.on("message", (data: Buffer) => received.push(data));
    await once(attacker, "open");
    await until(() => received.length === 1, 10_000, "hello");
    attacker.pause();
    for (let id = 1; id <= STREAMS + 1; id++)
      attacker.send(encodeFrame({ type: "open", id, method: "session.control", params: {} }));

    // Not read: the host builds baselines only while the socket's backlog allows.
    const unread = await host.measure(async () => {
      await canary.stream(40, 25);
      return canary.check();
    });
    report(
      `${STREAMS} control streams over ${SESSIONS} sessions, never read`,
      unread,
      `, bound ${mib(HELD_BOUND)} MiB`,
    );
    expect(unread.result).toBeGreaterThan(40);
    expect(unread.heldGrowth).toBeLessThan(HELD_BOUND);

    // Read: every baseline is built and sent while the canary's next turn streams.
    const read = await host.measure(async () => {
      await canary.stream(40, 25);
      attacker.resume();
      await until(() => received.length === STREAMS + 2, 120_000, "every stream answered");
      return canary.check();
    });
    const frames = received.slice(1).map((data) => decodeFrame(data, PEER_LIMITS) as AttackerFrame);
    const baselineBytes = Math.max(...received.map((data) => data.byteLength));
    report(
      `${STREAMS} control baselines over ${SESSIONS} sessions, read`,
      read,
      `, ${mib(baselineBytes)} MiB each`,
    );
    expect(read.result).toBeGreaterThan(80);

    const baselines = frames.filter((f) => f.type === "item");
    expect(new Set(baselines.map((f) => f.id)).size).toBe(STREAMS);
    for (const { value } of baselines) {
      expect(value?.kind).toBe("baseline");
      expect(value?.agents).toHaveLength(LIVE_AGENTS);
      expect(value?.projections).toHaveLength(LIVE_AGENTS);
    }
    const refused = frames.filter((f) => f.type === "error");
    expect(refused.map((f) => [f.id, f.error?.code])).toEqual([[STREAMS + 1, "too_many_streams"]]);
    attacker.terminate();
    await canary.dispose();
  }, 600_000);
});
