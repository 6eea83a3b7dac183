/**
 * An agent's run, or `"abandoned"` once its turn was stopped and the run has not settled within
 * `graceMs` of the stop: an agent that ignores its abort signal (a model call that never returns,
 * a loop that never looks) must not keep a cancelled turn open and its session busy, nor hold a
 * host's shutdown for ever. The run goes on unobserved: whatever it emits is refused (its turn's
 * signal is aborted) and its eventual failure is swallowed.
 */
export function untilStoppedOrGrace<T>(
  run: Promise<T>,
  signal: AbortSignal,
  graceMs: number,
): Promise<T | "abandoned"> {
  return new Promise<T | "abandoned">((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    // the run's own handlers below stay attached, so a failure after this is handled (and ignored)
    const onStop = () => {
      timer = setTimeout(() => resolve("abandoned"), graceMs);
    };
    const settled = () => {
      signal.removeEventListener("abort", onStop);
      clearTimeout(timer);
    };
    if (signal.aborted) onStop();
    else signal.addEventListener("abort", onStop, { once: true });
    run.then(
      (value) => {
        settled();
        resolve(value);
      },
      (err: unknown) => {
        settled();
        reject(err);
      },
    );
  });
}
