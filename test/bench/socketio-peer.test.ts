import { describe, expect, it } from "vitest";
import { deltaEvent, sessionIds } from "../../bench/harness/workload.js";
import { startSocketIo } from "../../bench/peers/socketio.js";
import { heldBytes } from "../support/held-bytes.js";

const MiB = 2 ** 20;

describe("the Socket.IO peer", () => {
  it("lets go of every event it kept once it is closed", async () => {
    const before = heldBytes();
    const peer = await startSocketIo();
    await peer.prepare(sessionIds(1));
    for (let batch = 0; batch < 500; batch++)
      await peer.publish(
        0,
        Array.from({ length: 100 }, (_, i) => deltaEvent(batch * 100 + i)),
      );
    const holding = heldBytes() - before;
    await peer.close();
    const after = heldBytes() - before;
    // 50,000 events are held while it runs (its log, and the recovery adapter's packets)...
    expect(holding).toBeGreaterThan(10 * MiB);
    // ...and not after: the adapter's purge timer outlives close() and would keep them for minutes.
    expect(after).toBeLessThan(3 * MiB);
  });
});
