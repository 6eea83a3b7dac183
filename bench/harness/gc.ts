import { gc } from "../../test/support/gc.js";

/**
 * A full collection before a round, so the round pays for its own garbage and not for what setup
 * or the previous scenario left behind. It costs 50–120 ms once the subjects' servers hold their
 * logs, which before every run was a sixth of the suite's time.
 */
export function collectGarbage(): void {
  gc();
}

/**
 * A young-generation collection before each run: the previous run's short-lived garbage is gone
 * (its cost would otherwise fall on the next subject) for a few ms.
 */
export function collectYoungGarbage(): void {
  gc({ type: "minor" });
}
