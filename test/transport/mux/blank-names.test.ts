import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DurableContent, type DurableSnapshot } from "../../support/durable-snapshot.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { connect } from "./mux-fixture.js";

const RULE = "must contain a visible character, not only whitespace or invisible characters";
const BLANKS = [" ", "\t\n", "\u3000", "\u200b", "\u0000"];

describe("a search query and the names a prompt's meta gives must show something (over the mux)", () => {
  let host: TestHost;
  let peer: MuxPeer;
  let durable: DurableContent;
  let before: DurableSnapshot;
  const cold = "cold-one";

  beforeAll(async () => {
    host = await startTestHost();
    peer = await connect(host);
    expect((await host.store.create({ sessionId: cold, owner: "admin", model: "demo" })).status).toBe(
      "created",
    );
    durable = new DurableContent(host.dbPath);
  });
  afterAll(async () => {
    durable?.close();
    await peer?.disconnect();
    await host?.dispose();
  });
  beforeEach(() => {
    before = durable.snapshot();
  });

  for (const blank of BLANKS) {
    it(`session.search for ${JSON.stringify(blank)} → bad_request naming /query`, async () => {
      const error = await peer.callError("session.search", { query: blank });
      expect(error.code).toBe("bad_request");
      expect(error.message).toBe(`params/query: ${RULE}`);
      expect(error.data).toEqual({ field: "/query" });
      expect(durable.snapshot()).toEqual(before);
    });

    for (const key of ["origin", "voiceLanguage"]) {
      it(`a prompt whose meta.${key} is ${JSON.stringify(blank)} → bad_request naming /meta/${key}; no turn`, async () => {
        const error = await peer.callError("session.prompt", {
          sessionId: cold,
          clientMessageId: "m1",
          text: "hello",
          meta: { [key]: blank },
        });
        expect(error.code).toBe("bad_request");
        expect(error.message).toBe(`params/meta/${key}: ${RULE}`);
        expect(error.data).toEqual({ field: `/meta/${key}` });
        expect(durable.snapshot()).toEqual(before);
        expect(host.host.live.isLive(cold)).toBe(false);
      });
    }
  }

  it("a query and meta names with a visible character are taken", async () => {
    expect(await peer.call("session.search", { query: " hello " })).toEqual({ hits: [] });
    const started = await peer.call<{ seq: number }>("session.prompt", {
      sessionId: cold,
      clientMessageId: "m2",
      text: "hello",
      meta: { origin: "scheduler", voiceLanguage: "en-GB", voiceInput: true },
    });
    expect(started.seq).toBeGreaterThan(0);
  });
});
