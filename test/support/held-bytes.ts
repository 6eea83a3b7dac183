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
