import { describe, expect, it } from "vitest";
import { decodePayload, encodePayload, sentBy } from "../../../src/store/postgres/pg-notice-payload.js";
import type { PendingNotice } from "../../../src/store/write-batch.js";

const append = (sessionId: string, seq: number): PendingNotice => ({
  sessionId,
  notice: {
    kind: "append",
    epoch: "e",
    events: [{ seq, at: 1, type: "assistant/delta", data: { turnId: "t", text: "x" } }],
  },
  projection: null,
});

describe("a host recognises its own NOTIFY payloads without parsing them", () => {
  it("says who sent a payload, whole or cut down to 're-read everything'", () => {
    const small = encodePayload("host-a", [append("s", 2)]);
    const huge = encodePayload(
      "host-a",
      Array.from({ length: 2_000 }, (_, i) => append(`session-${i}`, 1)),
    );
    expect(decodePayload(huge).changes).toBe("all");
    for (const text of [small, huge]) {
      expect(decodePayload(text).host).toBe("host-a");
      expect(sentBy(text, "host-a")).toBe(true);
      expect(sentBy(text, "host-b")).toBe(false);
      // an id that is a prefix of another is not that other host
      expect(sentBy(text, "host")).toBe(false);
    }
    const quoted = 'a"b\\c';
    expect(sentBy(encodePayload(quoted, [append("s", 2)]), quoted)).toBe(true);
  });
});
