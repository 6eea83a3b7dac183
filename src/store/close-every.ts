/**
 * Runs every closing step, in order, though one before it failed: a pool left open after a
 * failed step keeps its connections on the server (and a process waiting on its sockets) until
 * the process ends. Rejects with the first failure once all ran, as the host's own close does;
 * a later failure is most often the same cause (the server went away) and is dropped.
 */
export async function closeEvery(steps: readonly (() => unknown)[]): Promise<void> {
  let failure: { err: unknown } | undefined;
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      failure ??= { err };
    }
  }
  if (failure) throw failure.err;
}
