import type { Static, TSchema } from "@sinclair/typebox";
import { type TypeCheck, TypeCompiler } from "@sinclair/typebox/compiler";
import { SessionmuxError } from "./errors.js";
import { schemaViolation } from "./schema-error.js";

/** A compiled validator that turns the first schema violation into `bad_request` naming the field. */
export interface Validator<T extends TSchema> {
  readonly check: (value: unknown) => value is Static<T>;
  /** Returns the value typed, or throws `bad_request` with `data.field` (a JSON pointer). */
  readonly parse: (value: unknown, what?: string) => Static<T>;
}

const cache = new WeakMap<TSchema, TypeCheck<TSchema>>();

export function validator<T extends TSchema>(schema: T): Validator<T> {
  let compiled = cache.get(schema) as TypeCheck<T> | undefined;
  if (!compiled) {
    compiled = TypeCompiler.Compile(schema);
    cache.set(schema, compiled);
  }
  const c = compiled;
  return {
    check: (value: unknown): value is Static<T> => c.Check(value),
    parse: (value: unknown, what = "params") => {
      if (c.Check(value)) return value;
      const first = c.Errors(value).First();
      const violation = first ? schemaViolation(first) : { path: "", message: "invalid" };
      const field = violation.path || "/";
      throw new SessionmuxError("bad_request", `${what}${field === "/" ? "" : field}: ${violation.message}`, {
        data: { field },
      });
    },
  };
}
