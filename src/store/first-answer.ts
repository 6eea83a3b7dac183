import type { Resolution } from "../../protocol/index.js";
import type { ResolveOutcome, StoredInteraction } from "./live-state-store.js";

/** Whether two answers to an interaction are the same: the same outcome, or the same text. */
export function sameResolution(a: Resolution, b: Resolution): boolean {
  if ("outcome" in a) return "outcome" in b && a.outcome === b.outcome;
  return "answer" in b && a.answer === b.answer;
}

/**
 * What an answer to an interaction no longer pending comes to, the first answer winning on every
 * store: a withdrawn one is gone (`not_found`); a resolved one takes the same answer again as a
 * `repeat` and refuses another as a `conflict` naming the first. Undefined while it is pending.
 */
export function answerToSettled(
  stored: StoredInteraction,
  resolution: Resolution,
): Extract<ResolveOutcome, { status: "not_found" | "repeat" | "conflict" }> | undefined {
  if (stored.state === "withdrawn") return { status: "not_found" };
  if (stored.state !== "resolved") return undefined;
  return sameResolution(stored.resolution!, resolution)
    ? { status: "repeat", interaction: stored.interaction }
    : { status: "conflict", winner: stored.resolution! };
}
