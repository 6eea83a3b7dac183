import { describe, expect, it } from "vitest";
import { encodeFrame } from "../../../protocol/codec.js";
import { encodeInTurns } from "../../../src/transport/mux/encode-in-turns.js";
import { loopTurnsDuring } from "../../support/loop-turns.js";

const rows = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ sessionId: `s${i}`, seq: i, live: i % 2 === 0 }));

describe("a long baseline is encoded a slice per event-loop turn", () => {
  it.each([0, 1, 15, 16, 128, 129, 1_000, 70_000])(
    "arrays of %i elements: the bytes are exactly encodeFrame's",
    async (n) => {
      const map = {
        kind: "baseline",
        generation: "g",
        agents: rows(n),
        queues: [],
        projections: rows(n % 300),
      };
      expect(Buffer.from(await encodeInTurns(map)).equals(Buffer.from(encodeFrame(map)))).toBe(true);
    },
  );

  it("undefined values are left out, as the encoder leaves them out", async () => {
    const map = { kind: "baseline", note: undefined, agents: rows(200) };
    expect(Buffer.from(await encodeInTurns(map)).equals(Buffer.from(encodeFrame(map)))).toBe(true);
  });

  it("lets other work run between slices: 1,000 rows take eight turns of the loop", async () => {
    const turns = await loopTurnsDuring(() => encodeInTurns({ agents: rows(1_000) }));
    expect(turns).toBeGreaterThanOrEqual(8);
  });
});
