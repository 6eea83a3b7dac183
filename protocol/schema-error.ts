import { Kind, type TSchema } from "@sinclair/typebox";
import { type ValueError, type ValueErrorIterator, ValueErrorType } from "@sinclair/typebox/errors";

/** The violation a `bad_request` names: where (a JSON pointer, "/" for the whole value) and what. */
export interface SchemaViolation {
  path: string;
  message: string;
}

const isLiteralUnion = (schema: TSchema): boolean =>
  (schema.anyOf as TSchema[] | undefined)?.every((member) => member[Kind] === "Literal") ?? false;

const errorsOf = (iterator: ValueErrorIterator): ValueError[] => [...iterator];

/**
 * The violation to report for `first`, the first error a schema check found. A union's own error
 * ("Expected union value") names neither field nor reason, so the member the value came closest
 * to (fewest errors, the first on a tie) is followed instead: `{outcome: 7}` against
 * approve-or-answer is reported at `/outcome`, an oversized answer at `/answer` with its limit.
 * A union of literals lists the values it takes. A `pattern` whose schema states its `rule` is
 * reported as that rule.
 */
export function schemaViolation(first: ValueError): SchemaViolation {
  // a pattern that stands for a rule (a text needing a visible character) is told as that rule
  if (first.type === ValueErrorType.StringPattern && typeof first.schema.rule === "string")
    return { path: first.path, message: first.schema.rule };
  // a missing property is reported with its member's schema: only a union's own error is unfolded
  if (first.type !== ValueErrorType.Union) return { path: first.path, message: first.message };
  if (isLiteralUnion(first.schema)) {
    const values = (first.schema.anyOf as TSchema[]).map((member) => JSON.stringify(member.const));
    return { path: first.path, message: `Expected one of ${values.join(", ")}` };
  }
  // each step goes one schema deeper, and the protocol's schemas are not recursive
  let closest: ValueError[] | undefined;
  for (const member of first.errors) {
    const errors = errorsOf(member);
    if (errors.length > 0 && (!closest || errors.length < closest.length)) closest = errors;
  }
  if (closest) return schemaViolation(closest[0]!);
  return { path: first.path, message: first.message };
}
