import { describe, expect, it } from "vitest";
import { refusalHost } from "./refusal-host.js";

const RULE = "must contain a visible character, not only whitespace or invisible characters";
const BLANKS = [" ", "\t\n", "\u3000", "\u200b", "\u0000"];

describe("a search query and the names a prompt's meta gives must show something (over the mux)", () => {
  const cold = "cold-one";

  const shared = refusalHost(async (host, _peer) => {
    expect((await host.store.create({ sessionId: cold, owner: "admin", model: "demo" })).status).toBe(
      "created",
    );
  });

  for (const blank of BLANKS) {
    it(`session.search for ${JSON.stringify(blank)} → bad_request naming /query`, async () => {
      const error = await shared.peer.callError("session.search", { query: blank });
      expect(error.code).toBe("bad_request");
      expect(error.message).toBe(`params/query: ${RULE}`);
      expect(error.data).toEqual({ field: "/query" });
      shared.expectUnchanged();
    });

    for (const key of ["origin", "voiceLanguage"]) {
      it(`a prompt whose meta.${key} is ${JSON.stringify(blank)} → bad_request naming /meta/${key}; no turn`, async () => {
        const error = await shared.peer.callError("session.prompt", {
          sessionId: cold,
          clientMessageId: "m1",
          text: "hello",
          meta: { [key]: blank },
        });
        expect(error.code).toBe("bad_request");
        expect(error.message).toBe(`params/meta/${key}: ${RULE}`);
        expect(error.data).toEqual({ field: `/meta/${key}` });
        shared.expectUnchanged();
        expect(shared.host.host.live.isLive(cold)).toBe(false);
      });
    }
  }

  it("a query and meta names with a visible character are taken", async () => {
    expect(await shared.peer.call("session.search", { query: " hello " })).toEqual({ hits: [] });
    const started = await shared.peer.call<{ seq: number }>("session.prompt", {
      sessionId: cold,
      clientMessageId: "m2",
      text: "hello",
      meta: { origin: "scheduler", voiceLanguage: "en-GB", voiceInput: true },
    });
    expect(started.seq).toBeGreaterThan(0);
  });
});
