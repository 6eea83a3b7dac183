/** Elements that must be escaped inside a quoted array element. */
const SPECIAL = /["\\]/;

/**
 * A `text[]` parameter as PostgreSQL's array literal. `pg` builds the same text element by element
 * (two regular expressions and a concatenation each); for the hundreds of ids and types a batch
 * sends, one join is a fraction of that CPU and garbage.
 */
export function textArrayLiteral(values: readonly string[]): string {
  const quoted = values.map((value) =>
    SPECIAL.test(value) ? `"${value.replace(/["\\]/g, "\\$&")}"` : `"${value}"`,
  );
  return `{${quoted.join(",")}}`;
}

/** A `bigint[]` or `integer[]` parameter (safe integers only) as PostgreSQL's array literal. */
export function integerArrayLiteral(values: readonly number[]): string {
  return `{${values.join(",")}}`;
}
