import { describe, expect, it } from "vitest";
import { isSessionId, OpaqueIdSchema, SessionIdSchema, validator } from "../../protocol/index.js";

/** §1: a session id (and every opaque id) is 1-128 characters of `[A-Za-z0-9_-]`. */
const good = ["a", "Z", "0", "_", "-", "abc-DEF_123", "x".repeat(128), `${"-".repeat(127)}z`];
const bad: unknown[] = [
  "",
  "x".repeat(129),
  "a b",
  "a.b",
  "a/b",
  "a\n",
  "\na",
  "é",
  "a@b",
  7,
  null,
  undefined,
  ["a"],
];

describe("session and opaque ids", () => {
  const schemas = { session: validator(SessionIdSchema), opaque: validator(OpaqueIdSchema) };

  it("takes 1-128 characters of letters, digits, _ and -", () => {
    for (const id of good) {
      expect({ id, ok: isSessionId(id) }).toEqual({ id, ok: true });
      expect({ id, ok: schemas.session.check(id) }).toEqual({ id, ok: true });
      expect({ id, ok: schemas.opaque.check(id) }).toEqual({ id, ok: true });
    }
  });

  it("refuses an empty or longer id, any other character, and a non-string", () => {
    for (const id of bad) {
      expect({ id, ok: isSessionId(id) }).toEqual({ id, ok: false });
      expect({ id, ok: schemas.session.check(id) }).toEqual({ id, ok: false });
      expect({ id, ok: schemas.opaque.check(id) }).toEqual({ id, ok: false });
    }
  });
});
