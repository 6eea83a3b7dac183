import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { decodeListCursor, encodeListCursor } from "../../src/store/list-cursor.js";

/** A cursor around `text`, as a client that forged or mangled one would send it. */
const forged = (text: string) => Buffer.from(text, "utf8").toString("base64url");

function refusal(cursor: string): SessionmuxError {
  try {
    decodeListCursor(cursor);
  } catch (err) {
    if (err instanceof SessionmuxError) return err;
    throw err;
  }
  throw new Error(`cursor ${JSON.stringify(cursor)} was accepted`);
}

describe("a session.list cursor", () => {
  it("gives back the position it was made from, whatever the session id holds", () => {
    for (const position of [
      { updatedAt: 0, sessionId: "s" },
      { updatedAt: 1_796_207_845_655, sessionId: "chat-01" },
      { updatedAt: Number.MAX_SAFE_INTEGER, sessionId: "a:b:c" },
      { updatedAt: -1, sessionId: ":" },
      { updatedAt: 42, sessionId: "ünïcödé ✓ 🙂" },
    ]) {
      const cursor = encodeListCursor(position);
      // it travels in a query string as it is
      expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(decodeListCursor(cursor)).toEqual(position);
    }
  });

  it("is the UTF-8 text `updatedAt:sessionId` in base64url, so cursors of other hosts stay valid", () => {
    expect(decodeListCursor(forged("1000:s1"))).toEqual({ updatedAt: 1000, sessionId: "s1" });
    expect(Buffer.from(encodeListCursor({ updatedAt: 7, sessionId: "é" }), "base64url")).toEqual(
      Buffer.from("7:é", "utf8"),
    );
  });

  it("is refused with bad_request naming `before` when it is not one this host issues", () => {
    for (const text of [
      "12345", // no colon
      ":s1", // no time before the colon
      "abc:s1", // a time that is not a number
      "1.5:s1", // nor an integer
      "9007199254740992:s1", // nor a safe one
      "12:", // no session id
      "",
    ]) {
      const error = refusal(forged(text));
      expect(error.code, text).toBe("bad_request");
      expect(error.message).toBe("`before` is not a cursor this host issued; list again without it");
      expect(error.data).toEqual({ field: "/before" });
    }
    expect(refusal("garbage!").code).toBe("bad_request");
  });
});
