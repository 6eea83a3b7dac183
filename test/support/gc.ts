import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

setFlagsFromString("--expose-gc");

/**
 * V8's collector without `--expose-gc` on the command line: the flag set at run time exposes it
 * to contexts created afterwards. Full by default, young generation with `{ type: "minor" }`.
 */
export const gc = runInNewContext("gc") as (options?: { type: "minor" | "major" }) => void;
