/** How a promise settled so far: undefined while it is pending. */
export function settlement<T>(promise: Promise<T>): () => { value: T } | { error: unknown } | undefined {
  let settled: { value: T } | { error: unknown } | undefined;
  promise.then(
    (value) => {
      settled = { value };
    },
    (error: unknown) => {
      settled = { error };
    },
  );
  return () => settled;
}
