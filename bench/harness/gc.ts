import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/**
 * A full collection before a measured window, so the window pays for its own garbage and not for
 * what setup or the previous subject left behind (a major GC is tens of ms, a round's CPU ~1 s).
 */
export function collectGarbage(): void {
  gc();
}
