/**
 * Polls `check` (sync or async) until it returns a value other than undefined/false, or fails
 * after `timeoutMs` naming `what`. Tests wait for state this way, never by sleeping.
 */
export async function until<T>(
  check: () => T | undefined | false | PromiseLike<T | undefined | false>,
  timeoutMs = 10_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
