import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DurableContent, type DurableSnapshot } from "../../support/durable-snapshot.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { connect, createSession } from "./mux-fixture.js";

const RULE = "must contain a visible character, not only whitespace or invisible characters";

/** Titles a session list would show as a blank row. */
const BLANK_TITLES: [string, string][] = [
  ["empty", ""],
  ["spaces", "   "],
  ["tabs and newlines", "\t\n\r "],
  ["no-break and ideographic spaces", "\u00a0\u3000\u2003"],
  ["zero-width characters", "\u200b\u200d\ufeff"],
  ["direction marks", "\u200e\u202e"],
  ["control characters", "\u0000\u0007\u001b"],
];

describe("a session title must show something (create and rename, over the mux)", () => {
  let host: TestHost;
  let peer: MuxPeer;
  let durable: DurableContent;
  let sessionId: string;
  let before: DurableSnapshot;

  beforeAll(async () => {
    host = await startTestHost();
    peer = await connect(host);
    sessionId = await createSession(peer, { title: "kept" });
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

  async function titleOf(id: string): Promise<string> {
    const page = await peer.call<{ projection: { title: string }; headSeq: number }>("session.page", {
      sessionId: id,
    });
    return page.projection.title;
  }

  for (const [name, title] of BLANK_TITLES) {
    it(`rename to a title of ${name} → bad_request naming /title; the log and projection unchanged`, async () => {
      const error = await peer.callError("session.rename", { sessionId, title });
      expect(error.code).toBe("bad_request");
      expect(error.message).toBe(`params/title: ${RULE}`);
      expect(error.data).toEqual({ field: "/title" });
      expect(durable.snapshot()).toEqual(before);
      expect(await titleOf(sessionId)).toBe("kept");
    });

    it(`create with a title of ${name} → bad_request naming /title; no session created`, async () => {
      const error = await peer.callError("session.create", { sessionId: "never-made", title });
      expect(error.code).toBe("bad_request");
      expect(error.message).toBe(`params/title: ${RULE}`);
      expect(error.data).toEqual({ field: "/title" });
      expect(durable.snapshot()).toEqual(before);
      expect((await peer.callError("session.page", { sessionId: "never-made" })).code).toBe(
        "session_not_found",
      );
    });
  }

  it("a title with a visible character among spaces is kept exactly as sent", async () => {
    await peer.call("session.rename", { sessionId, title: "  \u200b x  " });
    expect(await titleOf(sessionId)).toBe("  \u200b x  ");
    const made = await createSession(peer, { title: " é " });
    expect(await titleOf(made)).toBe(" é ");
    await peer.call("session.rename", { sessionId, title: "kept" });
  });

  it("a create without a title still makes a session with the default title", async () => {
    const made = await createSession(peer);
    expect(await titleOf(made)).toBe("New chat");
  });
});
