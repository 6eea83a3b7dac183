/**
 * Reads rows a page at a time in key order and hands each to `visit`, waiting for it when it
 * answers a promise: `read(after)` answers at most `pageSize` rows whose key is above `after`
 * (`first`, a key below every row, for the first page); a shorter page is the last. `more` is asked
 * before each page.
 */
export async function eachPage<T, K>(
  read: (after: K) => Promise<readonly T[]>,
  first: K,
  pageSize: number,
  keyOf: (row: T) => K,
  visit: (row: T) => Promise<void> | void,
  more: () => boolean = () => true,
): Promise<void> {
  for (let after = first; more(); ) {
    const page = await read(after);
    for (const row of page) {
      const visited = visit(row);
      if (visited) await visited;
    }
    if (page.length < pageSize) return;
    after = keyOf(page[page.length - 1]!);
  }
}
