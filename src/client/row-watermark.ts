/**
 * Whether a session row replaces the row held for that session (a control projection, a listed
 * row): the higher watermark (`seq`) wins, so a row arriving late never overwrites a newer one;
 * but a row at seq 0 is the session just cleared (its new log is empty and its seq starts again)
 * and replaces any, or the old log's row would stand. The SDK's control mirror and the console's
 * session list both hold rows by this one rule.
 */
export function replacesRow(
  held: { readonly seq: number } | undefined,
  next: { readonly seq: number },
): boolean {
  return held === undefined || held.seq <= next.seq || next.seq === 0;
}
