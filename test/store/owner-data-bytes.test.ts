import { describe, expect, it } from "vitest";
import { OwnerDataBytes } from "../../src/store/owner-data-bytes.js";

describe("the stored data a transaction moved per owner", () => {
  it("sums each owner's additions and removals", () => {
    const moved = new OwnerDataBytes();
    moved.add("alice", 100);
    moved.add("bob", 7);
    moved.add("alice", -30);
    moved.add("alice", 5);
    expect(moved.moved()).toEqual([
      ["alice", 75],
      ["bob", 7],
    ]);
  });

  it("lists owners in ascending order, whatever order they were written in, so row locks are taken in one order", () => {
    const moved = new OwnerDataBytes();
    for (const owner of ["m", "b", "z", "a", "B", "é", "ab"]) moved.add(owner, 1);
    expect(moved.moved().map(([owner]) => owner)).toEqual(["B", "a", "ab", "b", "m", "z", "é"]);
  });

  it("leaves out an owner whose additions and removals cancel out", () => {
    const moved = new OwnerDataBytes();
    moved.add("carol", 40);
    moved.add("dave", -12);
    moved.add("carol", -40);
    moved.add("erin", 0);
    expect(moved.moved()).toEqual([["dave", -12]]);
  });

  it("forgets what was added once the owners' bytes were counted again", () => {
    const moved = new OwnerDataBytes();
    moved.add("alice", 100);
    moved.clear();
    expect(moved.moved()).toEqual([]);
    moved.add("alice", 3);
    expect(moved.moved()).toEqual([["alice", 3]]);
  });
});
