import { gc } from "./gc.js";

/**
 * Bytes this process holds on the JS heap and in buffers (socket backlogs live outside the V8
 * heap), after `collections` full collections: what memory-bound tests and the benchmarks compare.
 * A sampler running while load flows takes one: two full collections every few hundred ms
 * starve the event loop it measures.
 */
export function heldBytes(collections = 2): number {
  for (let i = 0; i < collections; i++) gc();
  const usage = process.memoryUsage();
  // `external` already includes `arrayBuffers`.
  return usage.heapUsed + usage.external;
}

/**
 * `heldBytes` once V8 has also freed the buffers a collection found dead: it returns their
 * memory on a background sweeper after the collection, so `external` read right after one can
 * still count tens of MiB of dead socket and read buffers. Collects, waits `settleMs`, collects
 * again and reads. For moments when the measured load is quiet (it yields to the event loop).
 */
export async function settledHeldBytes(settleMs = 20): Promise<number> {
  gc();
  await new Promise((resolve) => setTimeout(resolve, settleMs));
  return heldBytes(1);
}
