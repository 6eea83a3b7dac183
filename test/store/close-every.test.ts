import { describe, expect, it } from "vitest";
import { closeEvery } from "../../src/store/close-every.js";

/** A step that records when it starts and ends, settling after a few turns of the event loop. */
function step(log: string[], name: string, outcome: "ok" | "reject" | "throw" = "ok") {
  return () => {
    log.push(`start ${name}`);
    if (outcome === "throw") throw new Error(name);
    return (async () => {
      for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
      log.push(`end ${name}`);
      if (outcome === "reject") throw new Error(name);
    })();
  };
}

describe("closing every part", () => {
  it("runs each step after the one before it settled, and resolves when all succeeded", async () => {
    const log: string[] = [];
    await expect(
      closeEvery([step(log, "a"), step(log, "b"), () => log.push("sync c")]),
    ).resolves.toBeUndefined();
    expect(log).toEqual(["start a", "end a", "start b", "end b", "sync c"]);
    await expect(closeEvery([])).resolves.toBeUndefined();
  });

  it("runs the steps after a failed one, then rejects with the first failure", async () => {
    const log: string[] = [];
    const closing = closeEvery([
      step(log, "a"),
      step(log, "b", "reject"),
      step(log, "c", "throw"),
      step(log, "d"),
    ]);
    await expect(closing).rejects.toThrow(new Error("b"));
    expect(log).toEqual(["start a", "end a", "start b", "end b", "start c", "start d", "end d"]);
  });

  it("rejects with what a step threw even when that is not an Error, nor truthy", async () => {
    const ran: number[] = [];
    const closing = closeEvery([
      () => {
        ran.push(1);
        throw undefined;
      },
      () => {
        ran.push(2);
        throw new Error("later");
      },
    ]);
    await expect(closing).rejects.toBeUndefined();
    expect(ran).toEqual([1, 2]);
  });
});
