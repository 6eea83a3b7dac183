/** The longest step of `afterLoopTime`'s clock. */
const STEP_MS = 250;

/**
 * Calls `expire` once `ms` have passed in which the event loop ran, unless the returned function
 * is called first. Time the loop was held (a long synchronous handler elsewhere in the process)
 * counts for at most two steps of the clock (a fifth of `ms`, at most 250 ms each): a peer whose
 * answer arrived during the hold, or could not be asked for while the loop stood still, is not
 * counted silent for it. When the time is up, `expire` runs after the poll phase that follows, so
 * an answer already in a socket is read first.
 */
export function afterLoopTime(ms: number, expire: () => void): () => void {
  const step = Math.max(1, Math.min(STEP_MS, ms / 5));
  let spent = 0;
  let last = performance.now();
  let cancelled = false;
  // a timeout re-armed at each step, not an interval: nothing ticks once the time is up
  const clock = setTimeout(() => {
    const now = performance.now();
    spent += Math.min(now - last, 2 * step);
    last = now;
    if (spent < ms) clock.refresh();
    else setImmediate(() => cancelled || expire());
  }, step);
  clock.unref();
  return () => {
    cancelled = true;
    clearTimeout(clock);
  };
}
