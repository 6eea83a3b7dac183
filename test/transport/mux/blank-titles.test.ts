import { describe, expect, it } from "vitest";
import { createSession } from "./mux-fixture.js";
import { refusalHost } from "./refusal-host.js";

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
  let sessionId: string;

  const shared = refusalHost(async (_host, peer) => {
    sessionId = await createSession(peer, { title: "kept" });
  });

  async function titleOf(id: string): Promise<string> {
    const page = await shared.peer.call<{ projection: { title: string }; headSeq: number }>("session.page", {
      sessionId: id,
    });
    return page.projection.title;
  }

  for (const [name, title] of BLANK_TITLES) {
    it(`rename to a title of ${name} → bad_request naming /title; the log and projection unchanged`, async () => {
      const error = await shared.peer.callError("session.rename", { sessionId, title });
      expect(error.code).toBe("bad_request");
      expect(error.message).toBe(`params/title: ${RULE}`);
      expect(error.data).toEqual({ field: "/title" });
      shared.expectUnchanged();
      expect(await titleOf(sessionId)).toBe("kept");
    });

    it(`create with a title of ${name} → bad_request naming /title; no session created`, async () => {
      const error = await shared.peer.callError("session.create", { sessionId: "never-made", title });
      expect(error.code).toBe("bad_request");
      expect(error.message).toBe(`params/title: ${RULE}`);
      expect(error.data).toEqual({ field: "/title" });
      shared.expectUnchanged();
      expect((await shared.peer.callError("session.page", { sessionId: "never-made" })).code).toBe(
        "session_not_found",
      );
    });
  }

  it("a title with a visible character among spaces is kept exactly as sent", async () => {
    await shared.peer.call("session.rename", { sessionId, title: "  \u200b x  " });
    expect(await titleOf(sessionId)).toBe("  \u200b x  ");
    const made = await createSession(shared.peer, { title: " é " });
    expect(await titleOf(made)).toBe(" é ");
    await shared.peer.call("session.rename", { sessionId, title: "kept" });
  });

  it("a create without a title still makes a session with the default title", async () => {
    const made = await createSession(shared.peer);
    expect(await titleOf(made)).toBe("New chat");
  });
});
