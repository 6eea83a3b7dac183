import { describe, expect, it } from "vitest";
import { NotOwner } from "../../src/host/not-owner.js";

/** What a host that may not run a session's agent tells its call router (and its log). */
describe("NotOwner", () => {
  it("names the session and the live host holding its lease", () => {
    const err = new NotOwner("s1", "host-b");
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe("NotOwner");
    expect(err.message).toBe("session s1 is owned by host-b");
    expect({ sessionId: err.sessionId, holder: err.holder }).toEqual({ sessionId: "s1", holder: "host-b" });
  });

  it("says another host when this host lost the lease and no holder is known", () => {
    const err = new NotOwner("s2", null);
    expect(err.message).toBe("session s2 is owned by another host");
    expect(err.holder).toBeNull();
  });
});
