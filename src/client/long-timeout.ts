/**
 * The longest delay a timer waits, in ms (2^31 − 1, about 24.8 days), in Node and browsers alike:
 * a longer one fires after 1 ms (Node warns with a TimeoutOverflowWarning, browsers say nothing).
 */
export const LONGEST_TIMER_MS = 2_147_483_647;

/**
 * `setTimeout` for any delay: one past {@link LONGEST_TIMER_MS} is waited out in steps instead of
 * firing at once, and one that is not finite (`Infinity`: no bound) never fires and sets no timer.
 * Returns what clears it.
 */
export function longTimeout(run: () => void, ms: number): () => void {
  if (!Number.isFinite(ms)) return () => {};
  let timer: ReturnType<typeof setTimeout> | undefined;
  const wait = (left: number): void => {
    timer =
      left > LONGEST_TIMER_MS
        ? setTimeout(() => wait(left - LONGEST_TIMER_MS), LONGEST_TIMER_MS)
        : setTimeout(run, left);
  };
  wait(ms);
  return () => clearTimeout(timer);
}
