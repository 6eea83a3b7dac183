import type { Static, TSchema } from "@sinclair/typebox";
import { type TypeCheck, TypeCompiler } from "@sinclair/typebox/compiler";
import { SessionmuxError } from "./errors.js";
import { type SchemaViolation, schemaViolation } from "./schema-error.js";

/**
 * A rule across fields a schema cannot state clearly (a prompt needs text or an attachment),
 * checked once the value has the schema's shape: the violation, or undefined when it holds.
 */
export type CrossFieldRule<T> = (value: T) => SchemaViolation | undefined;

/** A compiled validator that turns the first schema violation into `bad_request` naming the field. */
export interface Validator<T extends TSchema> {
  readonly check: (value: unknown) => value is Static<T>;
  /** Returns the value typed, or throws `bad_request` with `data.field` (a JSON pointer). */
  readonly parse: (value: unknown, what?: string) => Static<T>;
}

const cache = new WeakMap<TSchema, TypeCheck<TSchema>>();

export function validator<T extends TSchema>(schema: T, rule?: CrossFieldRule<Static<T>>): Validator<T> {
  let compiled = cache.get(schema) as TypeCheck<T> | undefined;
  if (!compiled) {
    compiled = TypeCompiler.Compile(schema);
    cache.set(schema, compiled);
  }
  const c = compiled;
  return {
    check: (value: unknown): value is Static<T> => c.Check(value) && rule?.(value) === undefined,
    parse: (value: unknown, what = "params") => {
      let violation: SchemaViolation | undefined;
      if (c.Check(value)) {
        violation = rule?.(value);
        if (!violation) return value;
      } else {
        const first = c.Errors(value).First();
        violation = first ? schemaViolation(first) : { path: "", message: "invalid" };
      }
      const field = violation.path || "/";
      throw new SessionmuxError("bad_request", `${what}${field === "/" ? "" : field}: ${violation.message}`, {
        data: { field },
      });
    },
  };
}
