import { describe, expect, it } from "vitest";
import {
  Heartbeat,
  type HeartbeatReading,
  type HeartbeatVerdict,
} from "../../../src/transport/mux/heartbeat.js";

/**
 * The heartbeat's rule tick by tick (protocol-v1 §2): which tick drops a peer, and why. The
 * sockets it reads are in `heartbeat.test.ts`; here each tick is handed what a socket would show.
 */

const GRACE = 4;
const IDLE: HeartbeatReading = { backlog: 0, dispatched: 0, holding: false };

function pingOf(verdict: HeartbeatVerdict): Buffer {
  if (!("ping" in verdict)) throw new Error(`dropped: ${verdict.drop}`);
  return verdict.ping;
}

/** Ticks until the peer is dropped (at most `limit` ticks): the tick's number and the reason. */
function ticksToDrop(
  heartbeat: Heartbeat,
  reading: (tick: number) => HeartbeatReading,
  limit = 100,
): { tick: number; reason: string } | undefined {
  for (let tick = 1; tick <= limit; tick++) {
    const verdict = heartbeat.tick(reading(tick));
    if ("drop" in verdict) return { tick, reason: verdict.drop };
  }
  return undefined;
}

describe("heartbeat rule", () => {
  it("drops a peer owed nothing at its first quiet tick: one ping unanswered", () => {
    // tick 1 pings (the opening counts as heard), tick 2 finds no answer
    expect(ticksToDrop(new Heartbeat(GRACE), () => IDLE)).toEqual({ tick: 2, reason: "silent" });
  });

  it("keeps a peer owed nothing for as long as it answers each ping", () => {
    const heartbeat = new Heartbeat(GRACE);
    for (let tick = 0; tick < 50; tick++) heartbeat.pong(pingOf(heartbeat.tick(IDLE)));
    expect(ticksToDrop(heartbeat, () => IDLE)).toEqual({ tick: 2, reason: "silent" });
  });

  it("drops a peer whose backlog the kernel takes nothing from at its grace-th quiet tick", () => {
    const stalled = { backlog: 4 << 20, dispatched: 1 << 20, holding: false };
    // tick 1 is not quiet (the opening), ticks 2 to 5 are
    expect(ticksToDrop(new Heartbeat(GRACE), () => stalled)).toEqual({ tick: 1 + GRACE, reason: "stalled" });
  });

  it("keeps a peer whose backlog the kernel takes a step from every grace ticks, and drops it once the steps stop", () => {
    const heartbeat = new Heartbeat(GRACE);
    // a step every fourth tick: three quiet ticks between steps
    const stepping = (tick: number) => ({
      backlog: 8 << 20,
      dispatched: Math.floor(tick / GRACE),
      holding: false,
    });
    expect(ticksToDrop(heartbeat, stepping, 200)).toBeUndefined();
    // the step at tick 200 is the last: 201 to 204 are quiet
    expect(ticksToDrop(heartbeat, () => stepping(200))).toEqual({ tick: GRACE, reason: "stalled" });
  });

  it("keeps the grace once the backlog is gone until the peer answers a ping sent after it", () => {
    const tail = { backlog: 0, dispatched: 2, holding: false };
    const pingsAcrossTheEnd = (heartbeat: Heartbeat) => {
      const before = pingOf(heartbeat.tick({ backlog: 1 << 20, dispatched: 1, holding: false }));
      // the kernel took the rest: this ping is the first with nothing of the backlog before it
      const after = pingOf(heartbeat.tick(tail));
      return { before, after };
    };
    const reading = new Heartbeat(GRACE);
    // an answer to the ping sent with the backlog: the kernel may still hold what followed it
    reading.pong(pingsAcrossTheEnd(reading).before);
    expect(ticksToDrop(reading, () => tail)).toEqual({ tick: 1 + GRACE, reason: "stalled" });

    const caughtUp = new Heartbeat(GRACE);
    // it read everything up to the later ping: its next silence is its own
    caughtUp.pong(pingsAcrossTheEnd(caughtUp).after);
    expect(ticksToDrop(caughtUp, () => tail)).toEqual({ tick: 2, reason: "silent" });
  });

  it("keeps the newest answer when an earlier number comes after it (an unsolicited pong may repeat one)", () => {
    const heartbeat = new Heartbeat(GRACE);
    const tail = { backlog: 0, dispatched: 2, holding: false };
    const before = pingOf(heartbeat.tick({ backlog: 1 << 20, dispatched: 1, holding: false }));
    heartbeat.pong(pingOf(heartbeat.tick(tail)));
    heartbeat.pong(before);
    expect(ticksToDrop(heartbeat, () => tail)).toEqual({ tick: 2, reason: "silent" });
  });

  it("counts a pong without the ping's number as a sign of life that ends no grace", () => {
    const heartbeat = new Heartbeat(GRACE);
    const behind = { backlog: 1 << 20, dispatched: 1, holding: false };
    pingOf(heartbeat.tick(behind));
    // a number past every ping sent, and an empty payload (a peer that pongs unasked)
    const forged = Buffer.alloc(6);
    forged.writeUIntBE(1000, 0, 6);
    heartbeat.pong(forged);
    pingOf(heartbeat.tick({ ...behind, backlog: 0 }));
    heartbeat.pong(Buffer.alloc(0));
    pingOf(heartbeat.tick({ ...behind, backlog: 0 }));
    expect(ticksToDrop(heartbeat, () => ({ ...behind, backlog: 0 }))).toEqual({
      tick: GRACE,
      reason: "stalled",
    });
  });

  it("counts no tick quiet while the host itself holds the socket unread for its calls", () => {
    const heartbeat = new Heartbeat(GRACE);
    expect(ticksToDrop(heartbeat, () => ({ ...IDLE, holding: true }))).toBeUndefined();
    expect(ticksToDrop(heartbeat, () => IDLE)).toEqual({ tick: 1, reason: "silent" });
  });

  it("counts frames and pings from the peer as signs of life", () => {
    const heartbeat = new Heartbeat(GRACE);
    for (let tick = 0; tick < 20; tick++) {
      pingOf(heartbeat.tick(IDLE));
      if (tick % 2 === 0) heartbeat.heard();
      else heartbeat.pong(Buffer.alloc(0));
    }
    expect(ticksToDrop(heartbeat, () => IDLE)).toEqual({ tick: 2, reason: "silent" });
  });
});
