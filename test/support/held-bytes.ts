import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

setFlagsFromString("--expose-gc");
const collect = runInNewContext("gc") as () => void;

/**
 * Bytes this process holds on the JS heap and in buffers (socket backlogs live outside the V8
 * heap), after a full collection: what memory-bound tests and the benchmarks compare.
 */
export function heldBytes(): number {
  collect();
  collect();
  const usage = process.memoryUsage();
  // `external` already includes `arrayBuffers`.
  return usage.heapUsed + usage.external;
}
