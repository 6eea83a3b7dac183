import { describe, expect, test } from "vitest";
import { CountsByKey } from "../../src/store/counts-by-key.js";

describe("a count per key that keeps only the keys counted now", () => {
  test("a key counts what was added and taken away, and 0 before it was ever counted", () => {
    const counts = new CountsByKey();
    expect(counts.get("alice")).toBe(0);
    expect(counts.add("alice")).toBe(1);
    expect(counts.add("alice", 4)).toBe(5);
    expect(counts.add("bob")).toBe(1);
    expect(counts.add("alice", -2)).toBe(3);
    expect(counts.get("alice")).toBe(3);
    expect(counts.get("bob")).toBe(1);
  });

  test("a key whose count falls to zero is no longer kept", () => {
    const counts = new CountsByKey();
    counts.add("alice", 2);
    counts.add("bob");
    expect(counts.add("alice", -2)).toBe(0);
    expect(counts.has("alice")).toBe(false);
    expect(counts.has("bob")).toBe(true);
    expect(counts.size).toBe(1);
    expect([...counts.keys()]).toEqual(["bob"]);
  });

  test("a key taken below zero is dropped, and counts from zero when added again", () => {
    const counts = new CountsByKey();
    counts.add("alice", 3);
    expect(counts.add("alice", -5)).toBe(-2);
    expect(counts.has("alice")).toBe(false);
    expect(counts.size).toBe(0);
    expect(counts.add("alice")).toBe(1);
  });

  test("adding nothing to a key not kept keeps it out", () => {
    const counts = new CountsByKey();
    expect(counts.add("alice", 0)).toBe(0);
    expect(counts.has("alice")).toBe(false);
    expect(counts.size).toBe(0);
  });

  test("keys need not be strings", () => {
    const counts = new CountsByKey<object>();
    const a = {};
    const b = {};
    counts.add(a);
    counts.add(a);
    counts.add(b);
    expect(counts.get(a)).toBe(2);
    expect(counts.get({})).toBe(0);
    counts.add(b, -1);
    expect([...counts.keys()]).toEqual([a]);
  });
});
