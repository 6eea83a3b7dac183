import { describe, expect, it } from "vitest";
import { FairTurns } from "../../src/store/fair-turns.js";

/** Work that runs until its `finish` is called, recording when it started. */
function held(started: string[], label: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return {
    work: () => {
      started.push(label);
      return done.then(() => label);
    },
    finish: () => finish(),
  };
}

describe("FairTurns", () => {
  it("hands free slots out in turns across askers, each asker's work in its own order", async () => {
    const turns = new FairTurns(2);
    const started: string[] = [];
    const works = [
      ["alice", "a1"],
      ["alice", "a2"],
      ["alice", "a3"],
      ["alice", "a4"],
      ["bob", "b1"],
      ["bob", "b2"],
      ["carol", "c1"],
    ].map(([name, label]) => {
      const work = held(started, label as string);
      return { ...work, label, answer: turns.run({ name: name as string }, work.work) };
    });
    expect(started).toEqual(["a1", "a2"]);
    expect(turns.waiting).toBe(5);
    // each ends in the order it started
    for (let ended = 0; ended < works.length; ended++) {
      const work = works.find((w) => w.label === started[ended]);
      work?.finish();
      await work?.answer;
    }
    // bob's and carol's first before alice's third and fourth: she already had two running
    expect(started).toEqual(["a1", "a2", "b1", "c1", "a3", "b2", "a4"]);
    expect(turns.waiting).toBe(0);
  });

  it("drops waiting work whose asker's signal fired, never started, and fails it aborted", async () => {
    const turns = new FairTurns(1);
    const started: string[] = [];
    const first = held(started, "first");
    const running = turns.run({ name: "alice" }, first.work);
    const left = new AbortController();
    const dropped = held(started, "dropped");
    const gone = turns.run({ name: "bob", signal: left.signal }, dropped.work);
    const next = held(started, "next");
    const after = turns.run({ name: "carol" }, next.work);
    left.abort();
    await expect(gone).rejects.toMatchObject({ code: "aborted" });
    expect(turns.waiting).toBe(1);
    first.finish();
    next.finish();
    expect(await running).toBe("first");
    expect(await after).toBe("next");
    expect(started).toEqual(["first", "next"]);
  });

  it("lets work that already started run to its end when its asker leaves, and frees its slot on a failure", async () => {
    const turns = new FairTurns(1);
    const left = new AbortController();
    const started: string[] = [];
    const first = held(started, "first");
    const running = turns.run({ name: "alice", signal: left.signal }, first.work);
    left.abort();
    first.finish();
    expect(await running).toBe("first");
    await expect(
      turns.run({ name: "alice" }, () => {
        throw new Error("broken");
      }),
    ).rejects.toThrow("broken");
    expect(await turns.run({ name: "bob" }, async () => "free")).toBe("free");
  });
});
