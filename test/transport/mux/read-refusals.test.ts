import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { connect, createSession } from "./mux-fixture.js";

let host: TestHost;
let peer: MuxPeer;
beforeAll(async () => {
  host = await startTestHost();
  peer = await connect(host);
});
afterAll(async () => {
  await peer?.disconnect();
  await host?.dispose();
});

/** A deleted session is refused alike on every read path: one mapping of store outcomes (§7). */
describe("a deleted session refuses every read the same way", () => {
  it("follow of a deleted session, a follow whose session is deleted, and a page read", async () => {
    const sessionId = await createSession(peer);
    const live = peer.follow(sessionId);
    await peer.waitItem(live, (item) => item.kind === "caughtUp");
    await peer.call("session.delete", { sessionId });
    const during = (await peer.waitTerminal(live)).error;
    const after = (await peer.waitTerminal(peer.follow(sessionId))).error;
    const page = (await peer.callError("session.page", { sessionId })).toWire();
    for (const error of [during, after, page]) {
      expect(error?.code).toBe("session_retired");
      expect(error?.data).toEqual({ sessionId });
    }
    expect(new Set([during?.message, after?.message, page.message]).size).toBe(1);
  });
});
