import { describe, expect, it } from "vitest";
import { CallGate } from "../../../src/transport/mux/call-gate.js";

/**
 * The gate of one socket's calls (protocol-v1 §7), driven at its seams: the backlog check the
 * connection gives it, and calls the test lets finish. The same rules over a real socket are in
 * `call-backpressure.test.ts`.
 */

/** One turn of the event loop: immediates queued before this one have run. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function gateOf(maxInFlight: number, maxQueued: number) {
  const state = { allowed: false, changes: 0 };
  const started: number[] = [];
  const finish: (() => void)[] = [];
  const gate = new CallGate({
    maxInFlight,
    maxQueued,
    canStart: () => state.allowed,
    changed: () => {
      state.changes++;
    },
  });
  const submit = (n: number) =>
    gate.submit(() => {
      started.push(n);
      return new Promise<void>((resolve) => {
        finish[n] = resolve;
      });
    });
  return { gate, state, started, finish, submit };
}

describe("CallGate", () => {
  it("with no room to wait (maxQueued 0), a call that can start now runs; one that would wait is refused", () => {
    const { gate, state, started, finish, submit } = gateOf(1, 0);
    state.allowed = true;
    expect(submit(0)).toBe(true);
    expect(started).toEqual([0]);
    expect(submit(1)).toBe(false);
    finish[0]!();
    return Promise.resolve().then(() => {
      expect(submit(2)).toBe(true);
      expect(started).toEqual([0, 2]);
      // a backlog above its mark: nothing can start, so nothing is taken
      state.allowed = false;
      finish[2]!();
      return Promise.resolve().then(() => {
        expect(gate.running).toBe(0);
        expect(submit(3)).toBe(false);
      });
    });
  });

  it("once the backlog allows, waiting calls fill every free slot, one per turn of the event loop, in arrival order", async () => {
    const { gate, state, started, finish, submit } = gateOf(3, 8);
    for (let n = 0; n < 5; n++) expect(submit(n)).toBe(true);
    await turn();
    expect(started).toEqual([]);
    expect(gate.waiting).toBe(5);
    state.allowed = true;
    gate.pump();
    expect(started).toEqual([0]);
    await turn();
    expect(started).toEqual([0, 1]);
    await turn();
    expect(started).toEqual([0, 1, 2]);
    expect([gate.running, gate.waiting]).toEqual([3, 2]);
    await turn();
    expect(started).toEqual([0, 1, 2]);
    // a call that ends frees its slot for the next in line
    finish[1]!();
    await turn();
    expect(started).toEqual([0, 1, 2, 3]);
    expect([gate.running, gate.waiting]).toEqual([3, 1]);
    for (const n of [0, 2, 3]) finish[n]!();
    await turn();
    await turn();
    expect(started).toEqual([0, 1, 2, 3, 4]);
    finish[4]!();
    await turn();
    expect([gate.running, gate.waiting]).toEqual([0, 0]);
  });

  it("pumped twice in one turn, it still starts the waiting calls one turn at a time", async () => {
    const { gate, state, started, submit } = gateOf(4, 8);
    for (let n = 0; n < 6; n++) submit(n);
    state.allowed = true;
    // a call ending and the backlog draining in the same turn: each pump starts one call now
    gate.pump();
    gate.pump();
    expect(started).toEqual([0, 1]);
    await turn();
    expect(started).toEqual([0, 1, 2]);
    await turn();
    expect(started).toEqual([0, 1, 2, 3]);
    await turn();
    expect(started).toEqual([0, 1, 2, 3]);
    expect(gate.waiting).toBe(2);
  });

  it("holds exactly maxQueued waiting, refuses the next; calls cleared with the socket never run", async () => {
    const { gate, state, started, submit } = gateOf(1, 2);
    state.allowed = true;
    expect(submit(0)).toBe(true);
    expect(started).toEqual([0]);
    expect(submit(1)).toBe(true);
    expect(submit(2)).toBe(true);
    expect(submit(3)).toBe(false);
    expect(gate.waiting).toBe(2);
    const changes = state.changes;
    gate.pump();
    expect(state.changes).toBe(changes + 1);
    gate.clear();
    expect(gate.waiting).toBe(0);
    gate.pump();
    await turn();
    expect(started).toEqual([0]);
  });
});
