import { afterEach } from "vitest";

/** Something a test opened, undone after it. */
export type Cleanup = () => Promise<void> | void;

/**
 * A list that a test pushes what it opened on; after each test the list is run in reverse (the
 * last thing opened is closed first) and emptied, then `then` runs (spies restored, say, once
 * nothing that was opened writes through them any more).
 */
export function cleanupsAfterEach(then?: () => void): Cleanup[] {
  const cleanups: Cleanup[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    then?.();
  });
  return cleanups;
}
