import type { Subscription } from "rxjs";
import { describe, expect, it, vi } from "vitest";
import { controlMirror } from "../../src/client/control-mirror.js";
import type { ControlMirror } from "../../src/client/control-mirror-reducer.js";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { RemoteError } from "../../src/client/remote-errors.js";
import { ADMIN_TOKEN, startTestHost } from "../support/host.js";
import type { PeerConnection } from "./fake-peer.js";
import { peerFixture } from "./peer-fixture.js";

const { cleanups, peer, track } = peerFixture();
/** Zero delay: a retry the rules forbid would be sent before the next round trip completes. */
const instant = { baseMs: 0, capMs: 0 };

function wireError(code: string, retryable: boolean) {
  return { code, message: code, category: "internal", retryable };
}
function opensOf(conn: PeerConnection | undefined, method: string): number {
  return (conn?.received ?? []).filter((f) => f.type === "open" && f.method === method).length;
}
/** Two sequential round trips: anything the client sent after the last frame it read has arrived. */
async function settle(client: SessionmuxClient): Promise<void> {
  await client.call("session.models", {});
  await client.call("session.models", {});
}
function collect<T>(subscribe: (sink: { next(v: T): void; error(e: unknown): void }) => Subscription) {
  const seen: { values: T[]; error?: unknown; completed: boolean } = { values: [], completed: false };
  const sub = subscribe({ next: (v) => seen.values.push(v), error: (e) => (seen.error = e) });
  cleanups.push(() => sub.unsubscribe());
  return seen;
}
const models = { models: [], default: "demo" };
const baselineItem = (generation = "g1") => ({
  kind: "baseline",
  generation,
  agents: [],
  queues: [],
  jobs: [],
  interactions: [],
  projections: [],
});
const renamed = (seq: number) => ({ seq, at: 1, type: "session/renamed", data: { title: `r${seq}` } });
/** Opens of `method` so far on one connection, in order, with their frames. */
function opensFor(conn: PeerConnection, method: string) {
  return conn.received.filter((f) => f.type === "open" && f.method === method) as {
    id: number;
    params: { sessionId?: string; afterSeq?: number; epoch?: string };
  }[];
}

describe("stream retry rules (session-controller note)", () => {
  it("persistence_failure on a follow open is the stream's error, with no reopen", async () => {
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) =>
        conn.send({ type: "error", id: f.id, error: wireError("persistence_failure", true) }),
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect<FollowUpdate>((s) => followSession(client, "s", { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(seen.error).toBeInstanceOf(RemoteError));
    expect(seen.error).toMatchObject({ code: "persistence_failure" });
    await settle(client);
    expect(opensOf(p.connections[0], "session.follow")).toBe(1);
  });

  it("persistence_failure mid-stream ends the control mirror with that error, its last value stale", async () => {
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) => {
        conn.send({
          type: "item",
          id: f.id,
          value: {
            kind: "baseline",
            generation: "g1",
            agents: [],
            queues: [],
            jobs: [],
            interactions: [],
            projections: [],
          },
        });
        conn.send({ type: "error", id: f.id, error: wireError("persistence_failure", true) });
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect<ControlMirror>((s) => controlMirror(client, { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(seen.error).toMatchObject({ code: "persistence_failure" }));
    expect(seen.values.map((m) => [m.generation, m.stale, m.lastChange?.kind])).toEqual([
      ["g1", false, "baseline"],
      ["g1", true, "stale"],
    ]);
    await settle(client);
    expect(opensOf(p.connections[0], "session.control")).toBe(1);
  });

  it("a control mirror the host ends, or whose client closes, leaves a stale last value", async () => {
    let ending = true;
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) => {
        conn.send({ type: "item", id: f.id, value: baselineItem() });
        if (ending) conn.send({ type: "end", id: f.id });
      },
    });
    const ended = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const byHost: ControlMirror[] = [];
    let hostEnded = false;
    const first = controlMirror(ended, { backoff: instant }).subscribe({
      next: (m) => byHost.push(m),
      complete: () => (hostEnded = true),
    });
    cleanups.push(() => first.unsubscribe());
    await vi.waitFor(() => expect(hostEnded).toBe(true));
    expect(byHost.map((m) => m.stale)).toEqual([false, true]);

    ending = false;
    const closing = createNodeClient({ url: p.url, token: "t", backoff: instant });
    const byClient: ControlMirror[] = [];
    let clientEnded = false;
    const second = controlMirror(closing, { backoff: instant }).subscribe({
      next: (m) => byClient.push(m),
      complete: () => (clientEnded = true),
    });
    cleanups.push(() => second.unsubscribe());
    await vi.waitFor(() => expect(byClient).toHaveLength(1));
    closing.close();
    await vi.waitFor(() => expect(clientEnded).toBe(true));
    expect(byClient.map((m) => m.stale)).toEqual([false, true]);
  });

  it("a caller's unsubscribe emits nothing more", async () => {
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) => conn.send({ type: "item", id: f.id, value: baselineItem() }),
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen: ControlMirror[] = [];
    const sub = controlMirror(client, { backoff: instant }).subscribe((m) => seen.push(m));
    await vi.waitFor(() => expect(seen).toHaveLength(1));
    sub.unsubscribe();
    await settle(client);
    expect(seen.map((m) => m.stale)).toEqual([false]);
  });

  it("a stream whose open keeps failing gets one isolated retry per host generation, then waits for the next", async () => {
    let generation = "g1";
    const p = await peer({
      generation: () => generation,
      onCall: () => models,
      onOpen: (conn, f) => conn.send({ type: "error", id: f.id, error: wireError("slow_consumer", true) }),
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect<FollowUpdate>((s) => followSession(client, "s", { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(opensOf(p.connections[0], "session.follow")).toBe(2));
    await settle(client);
    await settle(client);
    expect(opensOf(p.connections[0], "session.follow")).toBe(2);

    // A reconnect to the same host generation does not end the wait.
    p.killAll();
    await vi.waitFor(() => expect(client.hello).toBeDefined());
    await vi.waitFor(() => expect(p.connections).toHaveLength(2));
    await settle(client);
    expect(opensOf(p.connections[1], "session.follow")).toBe(0);

    // The host restarted: a new generation gives the stream one open and one retry again.
    generation = "g2";
    p.killAll();
    await vi.waitFor(() => expect(opensOf(p.connections[2], "session.follow")).toBe(2));
    await settle(client);
    expect(opensOf(p.connections[2], "session.follow")).toBe(2);
    expect(seen.error).toBeUndefined();
  });

  it("a non-retryable open failure is terminal at once; an unexpected end completes the stream", async () => {
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) => {
        if (f.method === "session.follow") {
          conn.send({
            type: "error",
            id: f.id,
            error: { ...wireError("session_not_found", false), category: "business" },
          });
        } else conn.send({ type: "end", id: f.id });
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const follow = collect<FollowUpdate>((s) =>
      followSession(client, "s", { backoff: instant }).subscribe(s),
    );
    let completed = false;
    const sub = controlMirror(client, { backoff: instant }).subscribe({ complete: () => (completed = true) });
    cleanups.push(() => sub.unsubscribe());
    await vi.waitFor(() => expect(follow.error).toMatchObject({ code: "session_not_found" }));
    await vi.waitFor(() => expect(completed).toBe(true));
    await settle(client);
    expect(opensOf(p.connections[0], "session.follow")).toBe(1);
    expect(opensOf(p.connections[0], "session.control")).toBe(1);
  });
});

describe("progress and repair on supervised streams", () => {
  it("each baseline restores the control stream's isolated retry; the mirror is stale from each loss to the next baseline", async () => {
    let opens = 0;
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) => {
        opens += 1;
        conn.send({ type: "item", id: f.id, value: baselineItem() });
        // the first three opens fail after their baseline, in one host generation; the fourth stays
        if (opens <= 3) conn.send({ type: "error", id: f.id, error: wireError("slow_consumer", true) });
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect<ControlMirror>((s) => controlMirror(client, { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(opens).toBe(4));
    await settle(client);
    expect(opens).toBe(4);
    expect(seen.values.map((m) => [m.stale, m.lastChange?.kind])).toEqual([
      [false, "baseline"],
      [true, "stale"],
      [false, "baseline"],
      [true, "stale"],
      [false, "baseline"],
      [true, "stale"],
      [false, "baseline"],
    ]);
    // stale keeps what the mirror knew
    expect(seen.values[1]?.generation).toBe("g1");
    expect(seen.error).toBeUndefined();
  });

  it("a control stream failing without a baseline spends its retry and marks the mirror stale only once", async () => {
    let opens = 0;
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) => {
        opens += 1;
        if (opens === 2) conn.send({ type: "item", id: f.id, value: baselineItem() });
        conn.send({ type: "error", id: f.id, error: wireError("slow_consumer", true) });
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect<ControlMirror>((s) => controlMirror(client, { backoff: instant }).subscribe(s));
    // open 1 fails before any baseline (its retry is open 2); open 2's baseline restores the
    // retry (open 3); open 3 fails with the retry spent: wait for another host generation
    await vi.waitFor(() => expect(opens).toBe(3));
    await settle(client);
    await settle(client);
    expect(opens).toBe(3);
    // nothing before the first baseline (there was nothing to mark), one stale mark for two losses
    expect(seen.values.map((m) => [m.stale, m.lastChange?.kind])).toEqual([
      [false, "baseline"],
      [true, "stale"],
    ]);
    expect(seen.error).toBeUndefined();
  });

  it("a lost socket marks the mirror stale and the next socket's baseline clears it", async () => {
    let generation = "g1";
    const p = await peer({
      generation: () => generation,
      onCall: () => models,
      onOpen: (conn, f) => conn.send({ type: "item", id: f.id, value: baselineItem(generation) }),
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect<ControlMirror>((s) => controlMirror(client, { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(seen.values).toHaveLength(1));
    generation = "g2";
    p.killAll();
    await vi.waitFor(() => expect(seen.values).toHaveLength(3));
    expect(seen.values.map((m) => [m.stale, m.generation, m.generationChanged])).toEqual([
      [false, "g1", false],
      [true, "g1", false],
      [false, "g2", true],
    ]);
    expect(seen.error).toBeUndefined();
  });

  it("events restore a follow stream's isolated retry; opened and caughtUp alone do not", async () => {
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) => {
        const params = f.params as { sessionId: string; afterSeq: number };
        const n = opensFor(conn, "session.follow").filter(
          (o) => o.params.sessionId === params.sessionId,
        ).length;
        conn.send({ type: "item", id: f.id, value: { kind: "opened", epoch: "E", headSeq: 4 } });
        if (params.sessionId === "busy") {
          // each open delivers the next event, then the first three fail
          conn.send({
            type: "item",
            id: f.id,
            value: { kind: "events", events: [renamed(params.afterSeq + 1)] },
          });
          if (n <= 3) conn.send({ type: "error", id: f.id, error: wireError("slow_consumer", true) });
        } else {
          conn.send({ type: "item", id: f.id, value: { kind: "caughtUp", seq: 0 } });
          conn.send({ type: "error", id: f.id, error: wireError("slow_consumer", true) });
        }
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const busy = collect<FollowUpdate>((s) =>
      followSession(client, "busy", { backoff: instant }).subscribe(s),
    );
    const quiet = collect<FollowUpdate>((s) =>
      followSession(client, "quiet", { backoff: instant }).subscribe(s),
    );
    const conn = () => p.connections[0] as PeerConnection;
    const opensOfSession = (id: string) =>
      opensFor(conn(), "session.follow").filter((o) => o.params.sessionId === id);
    await vi.waitFor(() => expect(opensOfSession("busy")).toHaveLength(4));
    await vi.waitFor(() => expect(opensOfSession("quiet")).toHaveLength(2));
    await settle(client);
    await settle(client);
    expect(opensOfSession("busy").map((o) => o.params.afterSeq)).toEqual([0, 1, 2, 3]);
    expect(opensOfSession("quiet")).toHaveLength(2);
    expect(busy.values.flatMap((u) => (u.kind === "events" ? u.events.map((e) => e.seq) : []))).toEqual([
      1, 2, 3, 4,
    ]);
    expect(busy.error).toBeUndefined();
    expect(quiet.error).toBeUndefined();
  });

  it("a gap in the events makes the follower reopen from the last seq it applied; a replayed duplicate tells the caller nothing", async () => {
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) => {
        const item = (value: unknown) => conn.send({ type: "item", id: f.id, value });
        item({ kind: "opened", epoch: "E", headSeq: 3 });
        if (opensFor(conn, "session.follow").length === 1) {
          item({ kind: "events", events: [renamed(1)] });
          item({ kind: "events", events: [renamed(1)] });
          item({ kind: "events", events: [renamed(3)] });
        } else {
          item({ kind: "events", events: [renamed(1), renamed(2), renamed(3)] });
          item({ kind: "caughtUp", seq: 3 });
        }
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect<FollowUpdate>((s) => followSession(client, "s", { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(seen.values.at(-1)?.kind).toBe("caughtUp"));
    const opens = opensFor(p.connections[0] as PeerConnection, "session.follow");
    expect(opens.map((o) => o.params)).toEqual([
      { sessionId: "s", afterSeq: 0 },
      { sessionId: "s", afterSeq: 1, epoch: "E" },
    ]);
    expect(
      seen.values.map((u) =>
        u.kind === "events" ? `events ${u.events.map((e) => e.seq).join(",")}` : u.kind,
      ),
    ).toEqual(["opened", "events 1", "interrupted", "opened", "events 2,3", "caughtUp"]);
    expect(seen.error).toBeUndefined();
  });

  it("a stream waits the backoff it was given before its retry", async () => {
    const ids = new Map<string, number>();
    const p = await peer({
      onCall: () => models,
      onOpen: (conn, f) => {
        ids.set(f.method, f.id);
        if (f.method === "session.control") conn.send({ type: "item", id: f.id, value: baselineItem() });
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const backoff = { baseMs: 1_000, capMs: 1_000 };
    collect<FollowUpdate>((s) => followSession(client, "s", { backoff }).subscribe(s));
    collect<ControlMirror>((s) => controlMirror(client, { backoff }).subscribe(s));
    await vi.waitFor(() => expect(ids.size).toBe(2));
    const conn = p.connections[0] as PeerConnection;
    const counts = () => [opensOf(conn, "session.follow"), opensOf(conn, "session.control")];

    // Only the clocks of timeouts are faked, and only from here; the sockets stay real.
    vi.spyOn(Math, "random").mockReturnValue(0.5);
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      for (const id of ids.values()) {
        conn.send({ type: "error", id, error: wireError("slow_consumer", true) });
      }
      await settle(client);
      // the first step of the given policy: random (0.5) times 1 s
      vi.advanceTimersByTime(499);
      await settle(client);
      expect(counts()).toEqual([1, 1]);
      vi.advanceTimersByTime(1);
      await settle(client);
      expect(counts()).toEqual([2, 2]);
    } finally {
      vi.useRealTimers();
      vi.restoreAllMocks();
    }
  });
});

describe("a real host whose store refuses writes", () => {
  it("fails the write call with a retryable persistence_failure for its caller, and the streams stay open", async () => {
    const host = await startTestHost();
    cleanups.push(() => host.dispose());
    const client = track(createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN }));
    await client.create({ sessionId: "ro" });
    const follow = collect<FollowUpdate>((s) => followSession(client, "ro").subscribe(s));
    const mirror = collect<ControlMirror>((s) => controlMirror(client).subscribe(s));
    await vi.waitFor(() => expect(follow.values.some((u) => u.kind === "caughtUp")).toBe(true));
    await vi.waitFor(() => expect(mirror.values.at(-1)?.generation).toBeDefined());

    host.store.refuseWrites(true);
    const refused = await client
      .call("session.rename", { sessionId: "ro", title: "x" })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RemoteError);
    expect(refused).toMatchObject({ code: "persistence_failure", retryable: true });

    // The caller retries once storage recovers; the same follow stream carries the new event.
    host.store.refuseWrites(false);
    const { seq } = await client.call("session.rename", { sessionId: "ro", title: "x" });
    await vi.waitFor(() =>
      expect(follow.values.some((u) => u.kind === "events" && u.events.some((e) => e.seq === seq))).toBe(
        true,
      ),
    );
    expect(follow.values.filter((u) => u.kind === "opened")).toHaveLength(1);
    expect(mirror.values.filter((m) => m.lastChange?.kind === "baseline")).toHaveLength(1);
    expect(follow.error).toBeUndefined();
    expect(mirror.error).toBeUndefined();
  });
});
