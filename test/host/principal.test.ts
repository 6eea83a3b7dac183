import { describe, expect, it } from "vitest";
import { ADMIN, canSee, type Principal, principalProblem } from "../../src/host/principal.js";

/**
 * The one check of a principal, whatever named it: a name of 1-64 letters, digits and `._@-`
 * starting with a letter or digit, and `admin` only for an admin. And who sees whose sessions.
 */
const MALFORMED = {
  kind: "malformed_name",
  message: "a principal name is 1-64 of letters, digits and ._@- starting with a letter or digit",
};
const RESERVED = {
  kind: "reserved_name",
  message: 'the name "admin" is reserved for admin principals (the bare admin token); pick another name',
};

describe("principalProblem", () => {
  it("passes every name of the alphabet, from 1 to 64 characters", () => {
    const names = [
      "a",
      "Z",
      "7",
      "alice",
      "alice@example.com",
      "a.b_c-d@e",
      "Zz09",
      "0._@-",
      `a${"-".repeat(63)}`,
      "x".repeat(64),
      "admins",
      "Admin",
    ];
    for (const name of names)
      expect({ name, problem: principalProblem({ name, admin: false }) }).toEqual({ name });
  });

  it("refuses a name outside the alphabet, too long, empty, starting with a sign, or not a string", () => {
    const names: unknown[] = [
      "",
      "x".repeat(65),
      ".alice",
      "_alice",
      "@alice",
      "-alice",
      "bob smith",
      "alice\n",
      "\nalice",
      "alice\nadmin",
      "al/ice",
      "al+ice",
      "alïce",
      undefined,
      null,
      7,
      ["alice"],
    ];
    for (const name of names)
      expect({ name, problem: principalProblem({ name, admin: false }) }).toEqual({
        name,
        problem: MALFORMED,
      });
  });

  it("refuses an app's answer that is no principal at all as a malformed name", () => {
    expect(principalProblem(null as never)).toEqual(MALFORMED);
    expect(principalProblem("alice" as never)).toEqual(MALFORMED);
    expect(principalProblem({})).toEqual(MALFORMED);
  });

  it("reserves the name admin for admins: anything but admin true is refused", () => {
    expect(principalProblem({ name: "admin", admin: true })).toBeUndefined();
    expect(principalProblem(ADMIN)).toBeUndefined();
    for (const admin of [false, undefined, "true", 1])
      expect({ admin, problem: principalProblem({ name: "admin", admin }) }).toEqual({
        admin,
        problem: RESERVED,
      });
  });

  it("lets an admin by any other valid name pass, and still refuses a malformed admin name", () => {
    expect(principalProblem({ name: "root", admin: true })).toBeUndefined();
    expect(principalProblem({ name: "ro ot", admin: true })).toEqual(MALFORMED);
  });
});

describe("ADMIN and canSee", () => {
  const alice: Principal = { name: "alice", admin: false };
  const operator: Principal = { name: "operator", admin: true };

  it("ADMIN is the frozen admin principal named admin", () => {
    expect(ADMIN).toStrictEqual({ name: "admin", admin: true });
    expect(Object.isFrozen(ADMIN)).toBe(true);
  });

  it("an admin sees every owner's sessions; a plain principal only its own", () => {
    expect(canSee(ADMIN, "alice")).toBe(true);
    expect(canSee(operator, "bob")).toBe(true);
    expect(canSee(operator, "operator")).toBe(true);
    expect(canSee(alice, "alice")).toBe(true);
    expect(canSee(alice, "bob")).toBe(false);
    expect(canSee(alice, "admin")).toBe(false);
  });
});
