import { describe, expect, test } from "vitest";
import { nextLoopTurn } from "../../src/host/loop-turns.js";

/** Immediates still queued in this process. */
const immediates = () => process.getActiveResourcesInfo().filter((r) => r === "Immediate").length;

/** Resolves after `n` turns of the event loop. */
const loopTurns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

describe("yielding a turn of the event loop", () => {
  test("callers get one turn each, in the order they asked, with other immediates running between", async () => {
    const order: string[] = [];
    for (const name of ["a", "b", "c"]) void nextLoopTurn().then(() => order.push(name));
    setImmediate(() => {
      order.push("other 1");
      setImmediate(() => order.push("other 2"));
    });
    await loopTurns(5);
    expect(order).toEqual(["a", "other 1", "b", "other 2", "c"]);
  });

  test("a caller after the others have had their turns gets one too; nothing stays scheduled", async () => {
    await loopTurns(3);
    expect(immediates()).toBe(0);
    const order: string[] = [];
    void nextLoopTurn().then(() => order.push("later"));
    order.push("asked");
    await loopTurns(2);
    expect(order).toEqual(["asked", "later"]);
    await loopTurns(3);
    expect(immediates()).toBe(0);
  });
});
