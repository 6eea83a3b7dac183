import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { startRawWs } from "../../bench/baselines/raw-ws.js";
import { encode } from "../../bench/harness/shared-codec.js";
import type { FanoutSubject } from "../../bench/harness/subject.js";
import { sessionIds } from "../../bench/harness/workload.js";
import { startSocketIo } from "../../bench/peers/socketio.js";
import { publishRoundRobin } from "../../bench/scenarios/publish.js";
import { heldBytes } from "../support/held-bytes.js";

const MiB = 2 ** 20;

/**
 * Bytes held (after full collections) while a subject keeps 50,000 published events, and right
 * after its close() returned: what a scenario leaves to every scenario after it.
 */
async function heldAcrossClose(
  subject: FanoutSubject,
  connect: () => Promise<() => void> = async () => () => {},
): Promise<{ holding: number; after: number }> {
  const before = heldBytes();
  await subject.prepare(sessionIds(1));
  const disconnect = await connect();
  await publishRoundRobin(subject, 1, 50_000, 100, 1);
  const holding = heldBytes() - before;
  await subject.close();
  const after = heldBytes() - before;
  disconnect();
  return { holding, after };
}

describe("a benchmark subject lets go of the events it kept once it is closed", () => {
  it("Socket.IO: its recovery adapter's purge timer outlives close() and would keep them for minutes", async () => {
    const { holding, after } = await heldAcrossClose(await startSocketIo());
    // about 10 MiB, give or take what the heap reading moves: well above what close() may leave
    expect(holding).toBeGreaterThan(5 * MiB);
    expect(after).toBeLessThan(3 * MiB);
  });

  it("raw ws: a terminated follower's handlers reach the log until their close events run", async () => {
    const subject = await startRawWs();
    const { holding, after } = await heldAcrossClose(subject, async () => {
      const follower = new WebSocket(subject.url);
      await new Promise((resolve) => follower.once("open", resolve));
      follower.send(encode({ subscribe: [[1, 0]] }));
      return () => follower.terminate();
    });
    expect(holding).toBeGreaterThan(5 * MiB);
    expect(after).toBeLessThan(3 * MiB);
  });
});
