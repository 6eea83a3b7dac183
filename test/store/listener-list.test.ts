import { describe, expect, test } from "vitest";
import { ListenerList } from "../../src/store/listener-list.js";

describe("listeners called over the list as it stood when a delivery began", () => {
  test("a listener added or removed during a delivery takes effect from the next one", () => {
    const list = new ListenerList<(n: number) => void>();
    const calls: string[] = [];
    const late = (n: number) => calls.push(`late ${n}`);
    const second = (n: number) => calls.push(`second ${n}`);
    const first = (n: number) => {
      calls.push(`first ${n}`);
      if (n === 1) {
        list.add(late);
        list.delete(second);
      }
    };
    list.add(first);
    list.add(second);
    for (const l of list.current()) l(1);
    for (const l of list.current()) l(2);
    expect(calls).toEqual(["first 1", "second 1", "first 2", "late 2"]);
  });

  test("the kept array never serves a list that changed since it was made", () => {
    const list = new ListenerList<string>();
    list.add("a");
    const before = list.current();
    expect(list.current()).toBe(before);
    list.add("b");
    expect(list.current()).toEqual(["a", "b"]);
    expect(before).toEqual(["a"]);
    list.delete("a");
    expect(list.current()).toEqual(["b"]);
    const kept = list.current();
    // deleting what is not there changes nothing: the same array serves on
    list.delete("missing");
    expect(list.current()).toBe(kept);
    expect(list.size).toBe(1);
    list.delete("b");
    expect(list.current()).toEqual([]);
    expect(list.size).toBe(0);
  });
});
