/**
 * Failures of system calls a test cannot provoke on a local disk as root, injected through
 * `vi.mock` (whose factory imports this module: it is hoisted above the test's own imports).
 */

/** An error as a failed system call throws it, coded `code`. */
export function errno(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: simulated`), { code });
}

/** `module` with its function `name` throwing what `failure()` returns, while it returns one. */
export function failingWhileSet<T extends object>(
  module: T,
  name: keyof T & string,
  failure: () => Error | undefined,
): T {
  const real = module[name] as (...args: unknown[]) => unknown;
  return {
    ...module,
    [name]: (...args: unknown[]) => {
      const failed = failure();
      if (failed) throw failed;
      return real(...args);
    },
  };
}
