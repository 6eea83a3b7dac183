import type { Subscription } from "rxjs";
import { afterEach, describe, expect, it, vi } from "vitest";
import { controlMirror } from "../../src/client/control-mirror.js";
import type { ControlMirror } from "../../src/client/control-mirror-reducer.js";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { RemoteError } from "../../src/client/remote-errors.js";
import { ADMIN_TOKEN, startTestHost } from "../support/host.js";
import { type PeerConnection, startFakePeer } from "./fake-peer.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
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
function track(client: SessionmuxClient): SessionmuxClient {
  cleanups.push(() => client.close());
  return client;
}
function collect<T>(subscribe: (sink: { next(v: T): void; error(e: unknown): void }) => Subscription) {
  const seen: { values: T[]; error?: unknown; completed: boolean } = { values: [], completed: false };
  const sub = subscribe({ next: (v) => seen.values.push(v), error: (e) => (seen.error = e) });
  cleanups.push(() => sub.unsubscribe());
  return seen;
}
const models = { models: [], default: "demo" };

describe("stream retry rules (session-controller note)", () => {
  it("persistence_failure on a follow open is the stream's error, with no reopen", async () => {
    const p = await startFakePeer({
      onCall: () => models,
      onOpen: (conn, f) =>
        conn.send({ type: "error", id: f.id, error: wireError("persistence_failure", true) }),
    });
    cleanups.push(() => p.stop());
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect<FollowUpdate>((s) => followSession(client, "s", { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(seen.error).toBeInstanceOf(RemoteError));
    expect(seen.error).toMatchObject({ code: "persistence_failure" });
    await settle(client);
    expect(opensOf(p.connections[0], "session.follow")).toBe(1);
  });

  it("persistence_failure mid-stream ends the control mirror with that error", async () => {
    const p = await startFakePeer({
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
    cleanups.push(() => p.stop());
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect<ControlMirror>((s) => controlMirror(client, { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(seen.error).toMatchObject({ code: "persistence_failure" }));
    expect(seen.values.at(-1)?.generation).toBe("g1");
    await settle(client);
    expect(opensOf(p.connections[0], "session.control")).toBe(1);
  });

  it("a stream whose open keeps failing gets one isolated retry per host generation, then waits for the next", async () => {
    let generation = "g1";
    const p = await startFakePeer({
      generation: () => generation,
      onCall: () => models,
      onOpen: (conn, f) => conn.send({ type: "error", id: f.id, error: wireError("slow_consumer", true) }),
    });
    cleanups.push(() => p.stop());
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
    const p = await startFakePeer({
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
    cleanups.push(() => p.stop());
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
