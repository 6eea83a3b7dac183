import type { Subscription } from "rxjs";
import { describe, expect, it, vi } from "vitest";
import { controlMirror } from "../../src/client/control-mirror.js";
import type { ControlMirror } from "../../src/client/control-mirror-reducer.js";
import { createNodeClient } from "../../src/client/node.js";
import type { PeerConnection } from "./fake-peer.js";
import { peerFixture } from "./peer-fixture.js";

const { cleanups, peer, track } = peerFixture();
const instant = { baseMs: 0, capMs: 0 };

const agent = (i: number) => ({ sessionId: `s${i}`, state: "idle" });
const row = (i: number) => ({
  sessionId: `s${i}`,
  title: `t${i}`,
  createdAt: 1,
  updatedAt: 1,
  lastPromptAt: 0,
  turnCount: 0,
  blank: true,
  lastState: "idle",
  live: true,
  running: false,
  seq: 1,
});
const part = (ids: number[], more: boolean, generation = "g1") => ({
  kind: "baseline",
  generation,
  agents: ids.map(agent),
  queues: [],
  jobs: [],
  interactions: [],
  projections: ids.map(row),
  ...(more ? { more: true } : {}),
});
function collect(
  subscribe: (sink: { next(v: ControlMirror): void; error(e: unknown): void }) => Subscription,
) {
  const seen: { values: ControlMirror[]; error?: unknown } = { values: [] };
  const sub = subscribe({ next: (v) => seen.values.push(v), error: (e) => (seen.error = e) });
  cleanups.push(() => sub.unsubscribe());
  return seen;
}
const opens = (conn: PeerConnection | undefined) =>
  (conn?.received ?? []).filter((f) => f.type === "open" && f.method === "session.control") as {
    id: number;
    params: Record<string, unknown>;
  }[];

/** A host from before parts: it refuses `baselineParts` as an unknown field, and sends `ids` in one item. */
const hostBeforeParts = (ids: number[]) =>
  peer({
    onOpen: (conn, f) => {
      if ((f.params as { baselineParts?: boolean }).baselineParts !== undefined) {
        conn.send({
          type: "error",
          id: f.id,
          error: {
            code: "bad_request",
            message: "params/baselineParts: Unexpected property",
            category: "protocol",
            retryable: false,
            data: { field: "/baselineParts" },
          },
        });
        return;
      }
      conn.send({ type: "item", id: f.id, value: part(ids, false) });
    },
  });

describe("controlMirror and a baseline in parts (protocol-v1 §5, baselineParts)", () => {
  it("asks for parts and applies the baseline once, at its last part: never a half baseline, deltas after it", async () => {
    const p = await peer({
      onOpen: (conn, f) => {
        conn.send({ type: "item", id: f.id, value: part([1, 2], true) });
        conn.send({ type: "item", id: f.id, value: part([3], true) });
        conn.send({ type: "item", id: f.id, value: part([4, 5], false) });
        conn.send({ type: "item", id: f.id, value: { kind: "agent", sessionId: "s6", state: "running" } });
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect((s) => controlMirror(client, { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(seen.values).toHaveLength(2));
    expect(opens(p.connections[0]).map((o) => o.params)).toEqual([{ baselineParts: true }]);
    const [baseline, delta] = seen.values;
    expect(Object.keys(baseline!.agents)).toEqual(["s1", "s2", "s3", "s4", "s5"]);
    expect(Object.keys(baseline!.projections)).toEqual(["s1", "s2", "s3", "s4", "s5"]);
    expect(baseline!.stale).toBe(false);
    // the change callers log is the whole baseline, as one item
    expect(baseline!.lastChange).toEqual(part([1, 2, 3, 4, 5], false));
    expect(Object.keys(delta!.agents)).toEqual(["s1", "s2", "s3", "s4", "s5", "s6"]);
  });

  it("a stream lost between parts: its parts are dropped and the next stream's baseline stands alone", async () => {
    let opened = 0;
    const p = await peer({
      onOpen: (conn, f) => {
        opened++;
        if (opened === 1) {
          conn.send({ type: "item", id: f.id, value: part([1, 2], true) });
          conn.send({
            type: "error",
            id: f.id,
            error: { code: "slow_consumer", message: "behind", category: "internal", retryable: true },
          });
          return;
        }
        conn.send({ type: "item", id: f.id, value: part([7], true) });
        conn.send({ type: "item", id: f.id, value: part([8], false) });
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect((s) => controlMirror(client, { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(seen.values.some((m) => !m.stale)).toBe(true));
    const applied = seen.values.filter((m) => m.lastChange?.kind === "baseline");
    expect(applied.map((m) => Object.keys(m.agents))).toEqual([["s7", "s8"]]);
    expect(seen.error).toBeUndefined();
  });

  it("a host whose baseline never ends fails the mirror invalid_host_frame past 4,096 parts and its stream is closed", async () => {
    const p = await peer({
      onOpen: (conn, f) => {
        for (let i = 0; i < 4097; i++) conn.send({ type: "item", id: f.id, value: part([i], true) });
      },
    });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect((s) => controlMirror(client, { backoff: instant }).subscribe(s));
    await vi.waitFor(
      () => expect(seen.error).toMatchObject({ code: "invalid_host_frame", retryable: false }),
      {
        timeout: 10_000,
      },
    );
    // no half baseline was ever shown, and the stream is not opened again
    expect(seen.values).toEqual([]);
    const [open] = opens(p.connections[0]);
    await vi.waitFor(() =>
      expect(p.connections[0]!.received).toContainEqual(
        expect.objectContaining({ type: "close", id: open!.id }),
      ),
    );
    expect(opens(p.connections[0])).toHaveLength(1);
  });

  it("a host from before parts refuses the field: the stream is opened again without it, the baseline in one item", async () => {
    const p = await hostBeforeParts([1, 2]);
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const seen = collect((s) => controlMirror(client, { backoff: instant }).subscribe(s));
    await vi.waitFor(() => expect(seen.values).toHaveLength(1));
    expect(Object.keys(seen.values[0]!.agents)).toEqual(["s1", "s2"]);
    expect(opens(p.connections[0]).map((o) => o.params)).toEqual([{ baselineParts: true }, {}]);
    // after a lost socket it does not ask again on that host
    p.killAll();
    await vi.waitFor(() => expect(opens(p.connections[1])).toHaveLength(1));
    expect(opens(p.connections[1])[0]!.params).toEqual({});
    expect(seen.error).toBeUndefined();
  });

  it("unsubscribing closes the stream it opened again without the field", async () => {
    const p = await hostBeforeParts([1]);
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const values: ControlMirror[] = [];
    const sub = controlMirror(client, { backoff: instant }).subscribe({ next: (v) => values.push(v) });
    await vi.waitFor(() => expect(values).toHaveLength(1));
    const fallback = opens(p.connections[0])[1]!;
    expect(fallback.params).toEqual({});
    sub.unsubscribe();
    await vi.waitFor(() =>
      expect(p.connections[0]!.received).toContainEqual(
        expect.objectContaining({ type: "close", id: fallback.id }),
      ),
    );
  });

  it.each([
    { code: "bad_request", data: { field: "/x" } },
    { code: "bad_request", data: undefined },
    { code: "internal_error", data: { field: "/baselineParts" } },
  ])(
    "any other refusal of the open is the mirror's error, as before: $code $data",
    async ({ code, data }) => {
      const p = await peer({
        onOpen: (conn, f) =>
          conn.send({
            type: "error",
            id: f.id,
            error: { code, message: "no", category: "protocol", retryable: false, data },
          }),
      });
      const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
      const seen = collect((s) => controlMirror(client, { backoff: instant }).subscribe(s));
      await vi.waitFor(() => expect(seen.error).toMatchObject({ code }));
      expect(opens(p.connections[0])).toHaveLength(1);
    },
  );
});
