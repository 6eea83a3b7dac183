import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { heldWhenRefused, TurnAttachmentBudget } from "../../src/host/turn-attachment-budget.js";

/** What `take` threw, or undefined when it took. */
function refusal(take: () => unknown): unknown {
  try {
    take();
    return undefined;
  } catch (err) {
    return err;
  }
}

describe("TurnAttachmentBudget's rules (one principal's running turns, docs/reliability.md Limits)", () => {
  it("takes up to the bound exactly, and refuses a byte more overloaded, saying what was held", () => {
    const budget = new TurnAttachmentBudget(100);
    budget.take("ann", 60);
    budget.take("ann", 40);
    expect(budget.heldBy("ann")).toBe(100);
    const refused = refusal(() => budget.take("ann", 1));
    expect(refused).toMatchObject({
      code: "overloaded",
      data: { limit: "turn_attachment_bytes_per_principal", maxBytes: 100, heldBytes: 100, bytes: 1 },
    });
    expect(heldWhenRefused(refused)).toBe(100);
    // another principal's room is its own
    budget.take("bob", 100);
    expect(budget.heldBy("bob")).toBe(100);
  });

  it("a prompt whose attachments fit the bound exactly fits alone; one byte more never does", () => {
    const budget = new TurnAttachmentBudget(100);
    budget.assertFitsAlone(100);
    expect(refusal(() => budget.assertFitsAlone(101))).toMatchObject({
      code: "payload_too_large",
      data: { limit: "turn_attachment_bytes", maxBytes: 100, bytes: 101 },
    });
  });

  it("takes more than the bound only `alone`, and only while the principal holds nothing", () => {
    const budget = new TurnAttachmentBudget(100);
    expect(refusal(() => budget.take("ann", 150))).toMatchObject({ code: "overloaded" });
    expect(budget.heldBy("ann")).toBe(0);
    const give = budget.take("ann", 150, true);
    expect(budget.heldBy("ann")).toBe(150);
    expect(refusal(() => budget.take("ann", 10, true))).toMatchObject({ code: "overloaded" });
    // nothing to hold: taken whatever is held
    const none = budget.take("ann", 0);
    none();
    expect(budget.heldBy("ann")).toBe(150);
    give();
    give();
    expect(budget.heldBy("ann")).toBe(0);
  });

  it("gives back exactly what each take took, once", () => {
    const budget = new TurnAttachmentBudget(100);
    const first = budget.take("ann", 10);
    const second = budget.take("ann", 20);
    first();
    expect(budget.heldBy("ann")).toBe(20);
    first();
    expect(budget.heldBy("ann")).toBe(20);
    second();
    expect(budget.heldBy("ann")).toBe(0);
  });

  it("wakes a waiter when the principal's turns next give bytes back, once, and not after it was forgotten", async () => {
    const budget = new TurnAttachmentBudget(100);
    const give = budget.take("ann", 100);
    const other = budget.take("ann", 0);
    const wakes: string[] = [];
    budget.whenRoom("ann", 100, () => wakes.push("a"));
    const forgetB = budget.whenRoom("ann", 100, () => wakes.push("b"));
    forgetB();
    await Promise.resolve();
    expect(wakes).toEqual([]);
    other();
    give();
    give();
    expect(wakes).toEqual(["a"]);
    // holding less than at the refusal: some were given back since, so it wakes at once
    budget.whenRoom("ann", 50, () => wakes.push("c"));
    await Promise.resolve();
    expect(wakes).toEqual(["a", "c"]);
    // forgotten before that microtask: it never wakes
    const forgetD = budget.whenRoom("ann", 50, () => wakes.push("d"));
    forgetD();
    await Promise.resolve();
    await Promise.resolve();
    expect(wakes).toEqual(["a", "c"]);
  });

  it("reads the held bytes of its own refusal only", () => {
    const held = (limit: string, heldBytes: unknown, code: "overloaded" | "bad_request" = "overloaded") =>
      heldWhenRefused(new SessionmuxError(code, "x", { data: { limit, heldBytes } }));
    expect(held("turn_attachment_bytes_per_principal", 5)).toBe(5);
    expect(held("turn_attachment_bytes_per_principal", 5, "bad_request")).toBeUndefined();
    expect(held("another_limit", 5)).toBeUndefined();
    expect(held("turn_attachment_bytes_per_principal", "5")).toBeUndefined();
    expect(heldWhenRefused(new SessionmuxError("overloaded", "no data"))).toBeUndefined();
    expect(
      heldWhenRefused(
        Object.assign(new Error("x"), {
          code: "overloaded",
          data: { limit: "turn_attachment_bytes_per_principal", heldBytes: 5 },
        }),
      ),
    ).toBeUndefined();
  });
});
