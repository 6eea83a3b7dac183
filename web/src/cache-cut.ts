import type { SessionEvent } from "../../protocol/index.js";

/**
 * Where to cut a log held past the cache's per-session bound: the index of the first `turn/start`
 * from which the rest, with `overhead`, fits in `bound` bytes (each event's size from `bytesOf`),
 * or -1 when no turn's start leaves a part that fits. What is kept opens whole on the next visit
 * (from a turn's start), and the older part is read from the host as the person scrolls up.
 */
export function newestTurnsWithin(
  events: readonly SessionEvent[],
  bound: number,
  overhead: number,
  bytesOf: (event: SessionEvent) => number,
): number {
  let bytes = overhead;
  let first = events.length;
  while (first > 0 && bytes + bytesOf(events[first - 1]!) <= bound) bytes += bytesOf(events[--first]!);
  while (first < events.length && events[first]!.type !== "turn/start") first++;
  return first < events.length ? first : -1;
}
