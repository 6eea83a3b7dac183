import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ControlItem } from "../../../protocol/index.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { connect, createSession, expectRange, headSeq, STORE_VARIANTS } from "./mux-fixture.js";

/**
 * Session-controller note, verification item: streams on one socket are independent. Closing a
 * follow stream leaves the control stream on the same socket untouched, and the reverse.
 */

/** Frames of `id` after its terminal frame: there must be none. */
function afterEnd(peer: MuxPeer, id: number): number {
  const frames = peer.of(id);
  const end = frames.findIndex((f) => f.type === "end" || f.type === "error");
  return end < 0 ? 0 : frames.length - end - 1;
}

describe.each(STORE_VARIANTS)("streams sharing one socket ($name)", ({ options }) => {
  let h: TestHost;
  beforeAll(async () => {
    h = await startTestHost(options);
  });
  afterAll(async () => {
    await h?.dispose();
  });

  it("closing a follow stream leaves the control stream on the same socket untouched", async () => {
    const peer = await connect(h);
    try {
      const sessionId = await createSession(peer);
      const control = peer.open("session.control");
      await peer.waitItem<ControlItem>(control, (i) => i.kind === "baseline");
      const follow = peer.follow(sessionId);
      await peer.waitItem(follow, (i) => i.kind === "caughtUp");
      peer.close(follow);
      expect((await peer.waitTerminal(follow)).type).toBe("end");
      const before = peer.items(control).length;
      await peer.call("session.prompt", { sessionId, text: "/approve after close", clientMessageId: "c1" });
      const requested = await peer.waitItem<ControlItem>(
        control,
        (i) => i.kind === "interaction.requested" && i.interaction.sessionId === sessionId,
      );
      await peer.call("session.respond", {
        interactionId: requested.kind === "interaction.requested" ? requested.interaction.interactionId : "",
        response: { outcome: "approve" },
      });
      await peer.waitItem<ControlItem>(control, (i) => i.kind === "interaction.resolved");
      expect(peer.items(control).length).toBeGreaterThan(before);
      expect(peer.terminal(control)).toBeUndefined();
      expect(afterEnd(peer, follow)).toBe(0);
      expect(peer.unidentifiedErrors()).toEqual([]);
    } finally {
      await peer.disconnect();
    }
  });

  it("closing the control stream leaves a follow stream on the same socket untouched", async () => {
    const peer = await connect(h);
    try {
      const sessionId = await createSession(peer);
      const follow = peer.follow(sessionId);
      const control = peer.open("session.control");
      await peer.waitItem<ControlItem>(control, (i) => i.kind === "baseline");
      await peer.waitItem(follow, (i) => i.kind === "caughtUp");
      peer.close(control);
      expect((await peer.waitTerminal(control)).type).toBe("end");
      const controlItems = peer.items(control).length;
      await peer.call("session.prompt", { sessionId, text: "/stream 20 1", clientMessageId: "c1" });
      await peer.call("session.prompt", { sessionId, text: "second", clientMessageId: "c2" });
      await expect
        .poll(async () => (await h.store.projection(sessionId))?.turnCount, { timeout: 10_000, interval: 20 })
        .toBe(2);
      await expect
        .poll(async () => (await h.store.projection(sessionId))?.lastState, { timeout: 10_000, interval: 20 })
        .toBe("completed");
      const head = await headSeq(h, sessionId);
      await peer.waitSeq(follow, head);
      expectRange(peer.events(follow), 1, head);
      expect(peer.violations).toEqual([]);
      expect(peer.terminal(follow)).toBeUndefined();
      expect(peer.items(control).length).toBe(controlItems);
      expect(afterEnd(peer, control)).toBe(0);
    } finally {
      await peer.disconnect();
    }
  });
});
