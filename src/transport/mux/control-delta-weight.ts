import type { ControlDelta } from "../../host/live/live-state.js";

/** Weighed once per delta, however many streams of its principal hold it. */
const weights = new WeakMap<ControlDelta, number>();

/**
 * About the bytes a control delta keeps alive while it waits in a stream's queue: a queue
 * snapshot by its prompts' texts (each up to 64 KiB; a snapshot a queue of up to 100), anything
 * else by its JSON text. Shared strings of consecutive snapshots are counted again, so the weight
 * errs high, never low.
 */
export function controlDeltaWeight(delta: ControlDelta): number {
  let weight = weights.get(delta);
  if (weight === undefined) {
    weight =
      delta.kind === "queue"
        ? delta.items.reduce((sum, item) => sum + 64 + item.text.length + item.itemId.length, 64)
        : JSON.stringify(delta).length;
    weights.set(delta, weight);
  }
  return weight;
}
