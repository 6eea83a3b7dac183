import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../../protocol/codec.js";
import { Limits } from "../../../protocol/limits.js";
import { encodeBaselineParts } from "../../../src/transport/mux/baseline-parts.js";
import { loopTurnsDuring } from "../../support/loop-turns.js";

const KIB = 1024;
const WIDE = { maxStrBytes: 2 ** 22, maxArrayLength: 1_000_000, maxValues: 2 ** 25 };
const ARRAYS = ["agents", "queues", "jobs", "interactions", "projections"] as const;

type Part = Record<string, unknown> & { more?: true };
const row = (i: number, pad = 200) => ({
  sessionId: `s${i}`,
  seq: i,
  title: "t".repeat(pad),
  live: i % 2 === 0,
});
const baselineOf = (
  sizes: Partial<Record<(typeof ARRAYS)[number], number>>,
  pad = 200,
): Record<string, unknown> & Record<(typeof ARRAYS)[number], unknown[]> =>
  ({
    kind: "baseline",
    generation: "g7",
    ...Object.fromEntries(
      ARRAYS.map((key) => [
        key,
        Array.from({ length: sizes[key] ?? 0 }, (_, i) => ({ ...row(i, pad), key })),
      ]),
    ),
  }) as unknown as Record<string, unknown> & Record<(typeof ARRAYS)[number], unknown[]>;
/** The parts decoded, and the baseline they join into. */
function joined(parts: Uint8Array[]): { decoded: Part[]; whole: Record<string, unknown> } {
  const decoded = parts.map((p) => decodeFrame(p, WIDE) as Part);
  const whole: Record<string, unknown> = {
    kind: decoded.at(-1)?.kind,
    generation: decoded.at(-1)?.generation,
  };
  for (const key of ARRAYS) whole[key] = decoded.flatMap((p) => p[key] as unknown[]);
  return { decoded, whole };
}

describe("encodeBaselineParts: a control baseline as items of at most 64 KiB (protocol-v1 §5, baselineParts)", () => {
  it("splits a baseline of 3,000 sessions into parts under the bound that join into it, in order", async () => {
    const baseline = baselineOf({
      agents: 3_000,
      queues: 40,
      jobs: 7,
      interactions: 300,
      projections: 3_000,
    });
    expect(encodeFrame(baseline).length).toBeGreaterThan(1024 * KIB);
    const parts = await encodeBaselineParts(baseline);
    const { decoded, whole } = joined(parts);
    expect(whole).toEqual(baseline);
    expect(parts.length).toBeGreaterThan(16);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(Limits.streamItemBytes);
    for (const part of decoded) {
      expect(part.kind).toBe("baseline");
      expect(part.generation).toBe("g7");
      // every array present in every part, so each part is a valid baseline item on its own
      for (const key of ARRAYS) expect(Array.isArray(part[key])).toBe(true);
    }
    expect(decoded.map((p) => p.more)).toEqual([...decoded.slice(1).map(() => true), undefined]);
  });

  it("a small baseline is one part without `more`, decoding to the baseline itself", async () => {
    const baseline = baselineOf({ agents: 3, projections: 3 });
    const parts = await encodeBaselineParts(baseline);
    expect(parts).toHaveLength(1);
    expect(decodeFrame(parts[0]!)).toEqual(baseline);
    // an empty one too
    const empty = baselineOf({});
    expect((await encodeBaselineParts(empty)).map((p) => decodeFrame(p))).toEqual([empty]);
  });

  it("an entry larger than the bound goes alone; the parts around it stay under the bound", async () => {
    const baseline = baselineOf({ projections: 300 });
    const big = { sessionId: "big", items: [{ itemId: "i", text: "q".repeat(100 * KIB) }] };
    baseline.queues = [big];
    const parts = await encodeBaselineParts(baseline);
    const { decoded, whole } = joined(parts);
    expect(whole).toEqual(baseline);
    const alone = decoded.findIndex((p) => (p.queues as unknown[]).length === 1);
    expect(ARRAYS.map((key) => (decoded[alone]![key] as unknown[]).length)).toEqual([0, 1, 0, 0, 0]);
    parts.forEach((part, i) => {
      if (i !== alone) expect(part.length).toBeLessThanOrEqual(Limits.streamItemBytes);
    });
  });

  it("a bound of the caller's, and undefined fields left out as the encoder leaves them", async () => {
    const baseline = { ...baselineOf({ projections: 100 }, 50), note: undefined };
    const parts = await encodeBaselineParts(baseline, 2 * KIB);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(2 * KIB);
    const { decoded } = joined(parts);
    for (const part of decoded) expect("note" in part).toBe(false);
    expect(decoded.flatMap((p) => p.projections as unknown[])).toEqual(baseline.projections);
  });

  it.each([
    ["within the bound", Limits.streamItemBytes],
    ["with no bound", Number.POSITIVE_INFINITY],
  ])(
    "lets other work run while it encodes %s: 3,000 entries take many turns of the loop",
    async (_, maxBytes) => {
      const turns = await loopTurnsDuring(() =>
        encodeBaselineParts(baselineOf({ projections: 3_000 }), maxBytes),
      );
      expect(turns).toBeGreaterThanOrEqual(20);
      // a slice of entries per turn, not one entry
      expect(turns).toBeLessThan(100);
    },
  );

  it("counts its slices across arrays: a turn per 128 entries of five arrays, none for fewer", async () => {
    // array lengths that are no multiples of a slice, so slices do not start where arrays do
    const sizes = { agents: 1_000, queues: 100, jobs: 50, interactions: 150, projections: 700 };
    const turns = await loopTurnsDuring(() => encodeBaselineParts(baselineOf(sizes)));
    expect(turns).toBeGreaterThanOrEqual(Math.floor(2_000 / 128));
    const small = baselineOf({ agents: 20, queues: 20, jobs: 20, interactions: 20, projections: 20 });
    expect(await loopTurnsDuring(() => encodeBaselineParts(small))).toBe(0);
  });

  it("over many bounds and entry sizes: every part within the bound or one entry alone, never empty but the last", async () => {
    let seed = 11;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const baseline = baselineOf({ agents: 40, queues: 30, interactions: 30 }, 0);
    for (const key of ["agents", "queues", "interactions"] as const)
      baseline[key] = baseline[key].map((entry, i) => ({
        ...(entry as object),
        pad: "p".repeat(Math.floor(next() * 700)),
        i,
      }));
    for (let maxBytes = 300; maxBytes < 4_000; maxBytes += 37) {
      const parts = await encodeBaselineParts(baseline, maxBytes);
      const { decoded, whole } = joined(parts);
      expect(whole).toEqual(baseline);
      decoded.forEach((part, i) => {
        const entries = ARRAYS.reduce((n, key) => n + (part[key] as unknown[]).length, 0);
        if (part.more) expect(entries, `bound ${maxBytes}`).toBeGreaterThan(0);
        if (entries > 1) expect(parts[i]!.length, `bound ${maxBytes}`).toBeLessThanOrEqual(maxBytes);
      });
    }
  });

  it("refuses a map with more fields than a part's map header holds beside `more`", async () => {
    const fields = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, [i]]));
    await expect(encodeBaselineParts(fields(15))).rejects.toThrow(RangeError);
    const parts = await encodeBaselineParts(fields(14), 40);
    expect(parts.length).toBeGreaterThan(1);
    const decoded = parts.map((p) => decodeFrame(p) as Record<string, unknown[]>);
    const keys = Object.keys(fields(14));
    expect(Object.fromEntries(keys.map((key) => [key, decoded.flatMap((p) => p[key]!)]))).toEqual(fields(14));
    expect(decoded.at(-1)).toEqual(Object.fromEntries(keys.map((key) => [key, key === "f13" ? [13] : []])));
  });
});

describe("encodeBaselineParts with no bound: the one item of a client that did not ask for parts", () => {
  const rows = (n: number) =>
    Array.from({ length: n }, (_, i) => ({ sessionId: `s${i}`, seq: i, live: i % 2 === 0 }));
  const unbounded = async (map: Record<string, unknown>): Promise<Buffer> => {
    const parts = await encodeBaselineParts(map, Number.POSITIVE_INFINITY);
    expect(parts).toHaveLength(1);
    return Buffer.from(parts[0]!);
  };

  it.each([0, 1, 15, 16, 127, 128, 129, 1_000, 70_000])(
    "arrays of %i entries: one part whose bytes are exactly encodeFrame's",
    async (n) => {
      const map = {
        kind: "baseline",
        generation: "g",
        agents: rows(n),
        queues: [],
        projections: rows(n % 300),
      };
      expect((await unbounded(map)).equals(Buffer.from(encodeFrame(map)))).toBe(true);
    },
  );

  it("undefined values are left out, as the encoder leaves them out", async () => {
    const map = { kind: "baseline", note: undefined, agents: rows(200) };
    expect((await unbounded(map)).equals(Buffer.from(encodeFrame(map)))).toBe(true);
  });
});
