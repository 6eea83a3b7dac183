import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { appendDeltas, connect, createSession, STORE_VARIANTS } from "./mux-fixture.js";

interface Interaction {
  interactionId: string;
  sessionId: string;
  kind: string;
}
type ControlItem = {
  kind: string;
  generation?: string;
  agents?: { sessionId: string; state: string }[];
  queues?: { sessionId: string }[];
  jobs?: { sessionId: string }[];
  interactions?: Interaction[];
  projections?: { sessionId: string; seq: number }[];
  sessionId?: string;
  state?: string;
  interaction?: Interaction;
  interactionId?: string;
  resolution?: unknown;
};

async function openControl(peer: MuxPeer): Promise<{ id: number; baseline: ControlItem }> {
  const id = peer.open("session.control");
  const baseline = await peer.waitItem<ControlItem>(id, () => true);
  return { id, baseline };
}

describe.each(STORE_VARIANTS)("session.control (protocol-v1 §5) ($name)", ({ options: variant }) => {
  let host: TestHost;
  beforeAll(async () => {
    host = await startTestHost(variant);
  });
  afterAll(async () => {
    await host?.dispose();
  });

  it("sends one baseline first, then deltas as live state changes", async () => {
    const peer = await connect(host);
    const { id, baseline } = await openControl(peer);
    expect(baseline.kind).toBe("baseline");
    expect(baseline.generation).toBe(host.host.generation);
    for (const key of ["agents", "queues", "jobs", "interactions", "projections"] as const) {
      expect(Array.isArray(baseline[key])).toBe(true);
    }
    const sessionId = await createSession(peer);
    await peer.call("session.prompt", { sessionId, text: "/approve deploy", clientMessageId: "c1" });
    const requested = await peer.waitItem<ControlItem>(id, (i) => i.kind === "interaction.requested");
    expect(requested.interaction).toMatchObject({ sessionId, kind: "approval" });
    expect(peer.items<ControlItem>(id).some((i) => i.kind === "agent" && i.sessionId === sessionId)).toBe(
      true,
    );
    expect(
      peer.items<ControlItem>(id).some((i) => i.kind === "projection" && i.sessionId === sessionId),
    ).toBe(true);
    expect(peer.items<ControlItem>(id).filter((i) => i.kind === "baseline")).toHaveLength(1);
    await peer.disconnect();
  });

  it("a reconnect gets a fresh, complete baseline", async () => {
    const peer = await connect(host);
    const sessionId = await createSession(peer);
    await peer.call("session.prompt", { sessionId, text: "/ask which one?", clientMessageId: "c2" });
    await until(
      () => host.host.live.interactions().some((i) => i.sessionId === sessionId),
      10_000,
      "interaction",
    );
    await peer.disconnect();
    const again = await connect(host);
    const { baseline } = await openControl(again);
    expect(baseline.kind).toBe("baseline");
    expect(baseline.interactions?.some((i) => i.sessionId === sessionId && i.kind === "question")).toBe(true);
    expect(baseline.agents?.some((a) => a.sessionId === sessionId)).toBe(true);
    const projection = baseline.projections?.find((p) => p.sessionId === sessionId);
    const head = await host.store.header(sessionId);
    expect(projection?.seq).toBe(head.status === "ok" ? head.headSeq : -1);
    await again.disconnect();
  });

  it("first responder wins across two sockets; the loser learns the winning resolution", async () => {
    const a = await connect(host);
    const b = await connect(host);
    const { id: controlId } = await openControl(b);
    const sessionId = await createSession(a);
    await a.call("session.prompt", { sessionId, text: "/approve ship it", clientMessageId: "c3" });
    const requested = await b.waitItem<ControlItem>(
      controlId,
      (i) => i.kind === "interaction.requested" && i.interaction?.sessionId === sessionId,
    );
    const interactionId = requested.interaction?.interactionId as string;
    const answers = await Promise.allSettled([
      a.call("session.respond", { interactionId, response: { outcome: "approve" } }),
      b.call("session.respond", { interactionId, response: { outcome: "deny" } }),
    ]);
    const won = answers.filter((r) => r.status === "fulfilled");
    const lost = answers.filter((r) => r.status === "rejected");
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    const loss = (lost[0] as PromiseRejectedResult).reason as { code: string; data: unknown };
    expect(loss.code).toBe("interaction_already_resolved");
    const winning = won[0] === answers[0] ? { outcome: "approve" } : { outcome: "deny" };
    expect(JSON.stringify(loss.data)).toContain(winning.outcome);
    const winner = won[0] === answers[0] ? a : b;
    expect(await winner.call("session.respond", { interactionId, response: winning })).toEqual({
      resolved: true,
    });
    const resolved = await b.waitItem<ControlItem>(
      controlId,
      (i) => i.kind === "interaction.resolved" && i.interactionId === interactionId,
    );
    expect(resolved.resolution).toEqual(winning);
    await a.disconnect();
    await b.disconnect();
  });

  it("detach clears that session's live state", async () => {
    const peer = await connect(host);
    const { id } = await openControl(peer);
    const sessionId = await createSession(peer);
    await peer.call("session.prompt", { sessionId, text: "/ask still there?", clientMessageId: "c4" });
    await peer.waitItem<ControlItem>(
      id,
      (i) => i.kind === "interaction.requested" && i.interaction?.sessionId === sessionId,
    );
    await peer.call("session.delete", { sessionId });
    await peer.waitItem<ControlItem>(
      id,
      (i) => i.kind === "agent" && i.sessionId === sessionId && i.state === "detached",
    );
    const other = await connect(host);
    const { baseline } = await openControl(other);
    expect(baseline.agents?.some((a) => a.sessionId === sessionId)).toBe(false);
    expect(baseline.interactions?.some((i) => i.sessionId === sessionId)).toBe(false);
    expect(baseline.queues?.some((q) => q.sessionId === sessionId)).toBe(false);
    expect(baseline.jobs?.some((j) => j.sessionId === sessionId)).toBe(false);
    await peer.disconnect();
    await other.disconnect();
  });

  it("shows a principal only its own sessions", async () => {
    const alice = await connect(host, { token: ALICE_TOKEN });
    const bob = await connect(host, { token: BOB_TOKEN });
    const { id: bobControl } = await openControl(bob);
    const sessionId = await createSession(alice);
    await alice.call("session.prompt", { sessionId, text: "/ask private?", clientMessageId: "c5" });
    await until(
      () => host.host.live.interactions().some((i) => i.sessionId === sessionId),
      10_000,
      "interaction",
    );
    const probe = await createSession(bob);
    await bob.waitItem<ControlItem>(bobControl, (i) => i.kind === "projection" && i.sessionId === probe);
    expect(
      bob
        .items<ControlItem>(bobControl)
        .some((i) => i.sessionId === sessionId || i.interaction?.sessionId === sessionId),
    ).toBe(false);
    await alice.disconnect();
    await bob.disconnect();
  });
});

describe.each(STORE_VARIANTS)("session.control slow consumer ($name)", ({ options: variant }) => {
  let host: TestHost;
  beforeAll(async () => {
    host = await startTestHost({
      ...variant,
      mux: { controlMaxQueued: 20, followerHighWaterBytes: 64 * 1024 },
    });
  });
  afterAll(async () => {
    await host?.dispose();
  });

  it("a reader whose unsent control items exceed the bound is ended with slow_consumer; other streams go on", async () => {
    const peer = await connect(host, { keepEvents: false });
    const big = await createSession(peer);
    await appendDeltas(host, big, 60_000, 5_000, "z".repeat(100));
    const { id: controlId } = await openControl(peer);
    peer.pause();
    // A replay larger than every socket buffer on the way keeps this socket's backlog high.
    const followId = peer.follow(big);
    await vi.waitFor(async () => expect((await host.metrics.slowFollowers.get()).values[0]?.value).toBe(1), {
      timeout: 10_000,
    });
    const writer = await connect(host);
    const small = await createSession(writer);
    await appendDeltas(host, small, 40, 1);
    peer.resume();
    const ended = await peer.waitTerminal(controlId, 30_000);
    expect(ended.error?.code).toBe("slow_consumer");
    expect(ended.error?.retryable).toBe(true);
    const head = await host.store.header(big);
    await peer.waitSeq(followId, head.status === "ok" ? head.headSeq : -1, 60_000);
    expect(peer.violations).toEqual([]);
    expect(peer.terminal(followId)).toBeUndefined();
    await peer.disconnect();
    await writer.disconnect();
  });
});
