import { describe, expect, it } from "vitest";
import {
  applyAck,
  copyProjection,
  initialProjection,
  onlySeqMoved,
  type ProjectionState,
  projectEvent,
} from "../../src/store/projection.js";

const base = {
  sessionId: "s1",
  owner: "alice",
  epoch: "e1",
  createdAt: 1_000,
  title: "New chat",
  titleExplicit: false,
  model: "demo",
  ackedSettledAt: null,
};

/** Every field set to a value no other field has, the keys in reverse order of a new row's. */
function unusualRow(): ProjectionState {
  return {
    ackedSettledAt: 20,
    pendingInteractions: 19,
    turnHasText: true,
    titleExplicit: true,
    completionSettledAt: 16,
    hasUnseenCompletion: true,
    openTurnId: "turn-14",
    epoch: "epoch-13",
    seq: 12,
    messageCount: 11,
    lastState: "input-required",
    blank: false,
    turnCount: 8,
    lastPromptAt: 7,
    updatedAt: 6,
    createdAt: 5,
    model: "model-4",
    title: "title-3",
    owner: "owner-2",
    sessionId: "session-1",
  };
}

describe("copyProjection", () => {
  it("copies every field into a new row in the order of a new row, and changes nothing", () => {
    const row = unusualRow();
    const copy = copyProjection(row);
    expect(copy).not.toBe(row);
    expect(copy).toStrictEqual(unusualRow());
    expect(row).toStrictEqual(unusualRow());
    expect(Object.keys(copy)).toEqual(Object.keys(initialProjection(base)));
  });

  it("is what a fold and an ack start from: their rows have a new row's fields and order", () => {
    const order = Object.keys(initialProjection(base));
    const folded = projectEvent(unusualRow(), {
      seq: 13,
      at: 20,
      type: "assistant/delta",
      data: { turnId: "turn-14", text: "hi" },
    });
    expect(Object.keys(folded)).toEqual(order);
    expect(folded.seq).toBe(13);
    const acked = applyAck(unusualRow(), 16);
    expect(Object.keys(acked)).toEqual(order);
    expect(acked).toStrictEqual({ ...unusualRow(), hasUnseenCompletion: false, ackedSettledAt: 16 });
  });
});

describe("onlySeqMoved", () => {
  it("is true for a row whose head alone moved, and false when any other field differs", () => {
    expect(onlySeqMoved(unusualRow(), { ...unusualRow(), seq: 99 })).toBe(true);
    expect(onlySeqMoved(unusualRow(), unusualRow())).toBe(true);
    // every field of a new row, so a field added to the projection and not compared fails here
    const fields = Object.keys(initialProjection(base)) as (keyof ProjectionState)[];
    expect(fields).toHaveLength(Object.keys(unusualRow()).length);
    for (const field of fields) {
      if (field === "seq") continue;
      const changed = { ...unusualRow(), [field]: `changed ${field}` } as unknown as ProjectionState;
      expect(onlySeqMoved(unusualRow(), changed), field).toBe(false);
      expect(onlySeqMoved(changed, unusualRow()), field).toBe(false);
    }
  });
});
