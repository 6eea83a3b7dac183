import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Limits } from "../../../protocol/index.js";
import { userMessage } from "../../store/open-store.js";
import { ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { connect } from "./mux-fixture.js";

describe("session.search over the mux: what one search may make the host rank", () => {
  let host: TestHost;
  let alice: MuxPeer;
  let bob: MuxPeer;
  beforeAll(async () => {
    host = await startTestHost();
    alice = await connect(host, { token: ALICE_TOKEN });
    bob = await connect(host, { token: BOB_TOKEN });
    // another principal's messages, one past the bound, written straight to the host's store
    await host.store.create({ sessionId: "alices", owner: "alice", model: "m" });
    for (let written = 0; written <= Limits.maxSearchMatches; written += 500) {
      const count = Math.min(500, Limits.maxSearchMatches + 1 - written);
      await host.store.append(
        "alices",
        Array.from({ length: count }, (_, i) => userMessage(`walrus ${written + i}`, `w${written + i}`)),
      );
    }
  });
  afterAll(async () => {
    await alice?.disconnect();
    await bob?.disconnect();
    await host?.dispose();
  });

  it("refuses the principal owning the matches search_too_broad, typed, and the socket serves on", async () => {
    const refused = await alice.callError("session.search", { query: "walrus" });
    expect(refused).toMatchObject({
      code: "search_too_broad",
      category: "business",
      retryable: false,
      data: { max: Limits.maxSearchMatches },
    });
    // a two-letter last word is a whole word: no prefix of every `walrus`, so nothing to refuse
    expect(await alice.call("session.search", { query: "wa" })).toEqual({ hits: [] });
    expect(await alice.call("session.list", {})).toMatchObject({ sessions: [{ sessionId: "alices" }] });
  });

  it("answers a principal owning none of them its own hits: another's matches are not counted", async () => {
    expect(await bob.call("session.search", { query: "walrus" })).toEqual({ hits: [] });
    expect(await bob.call("session.list", {})).toEqual({ sessions: [] });
  });
});
