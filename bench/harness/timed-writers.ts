/** Concurrent writers, each making `appendsPerWriter` acknowledged writes one after another. */
export interface AppendShape {
  writers: number;
  appendsPerWriter: number;
}

/**
 * Runs `write(writer, n)` for every writer concurrently, each writer awaiting its writes one at a
 * time; the writes made and the wall time (ms) they took.
 */
export async function timedWriters(
  shape: AppendShape,
  write: (writer: number, n: number) => Promise<unknown>,
): Promise<{ total: number; ms: number }> {
  const started = performance.now();
  await Promise.all(
    Array.from({ length: shape.writers }, async (_, i) => {
      for (let n = 0; n < shape.appendsPerWriter; n++) await write(i, n);
    }),
  );
  return { total: shape.writers * shape.appendsPerWriter, ms: performance.now() - started };
}
