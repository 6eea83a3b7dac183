import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { startRawWs } from "../../bench/baselines/raw-ws.js";
import { encode } from "../../bench/harness/shared-codec.js";
import { deltaEvent, sessionIds } from "../../bench/harness/workload.js";
import { heldBytes } from "../support/held-bytes.js";

const MiB = 2 ** 20;

describe("the raw ws limit", () => {
  it("lets go of its in-memory log as soon as it is closed, with followers still connected", async () => {
    const before = heldBytes();
    const subject = await startRawWs();
    await subject.prepare(sessionIds(1));
    const follower = new WebSocket(subject.url);
    await new Promise((resolve) => follower.once("open", resolve));
    follower.send(encode({ subscribe: [[1, 0]] }));
    for (let batch = 0; batch < 500; batch++)
      await subject.publish(
        0,
        Array.from({ length: 100 }, (_, i) => deltaEvent(batch * 100 + i)),
      );
    const holding = heldBytes() - before;
    await subject.close();
    const after = heldBytes() - before;
    follower.terminate();
    // 50,000 events are kept for late followers while it runs...
    expect(holding).toBeGreaterThan(5 * MiB);
    // ...and not once close() returned: the terminated sockets' handlers still reach the log until
    // their close events run, which would leave it to the next scenario's collections.
    expect(after).toBeLessThan(3 * MiB);
  });
});
