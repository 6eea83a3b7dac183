import { type StringOptions, Type } from "@sinclair/typebox";
import { VISIBLE_TEXT_PATTERN, VISIBLE_TEXT_RULE } from "./visible-text.js";

/**
 * A string field whose meaning needs content (a title, an answer, an edit). `rule` is what
 * `schemaViolation` reports instead of the bare pattern when the value has none.
 */
export const VisibleText = (options: StringOptions = {}) =>
  Type.String({ ...options, pattern: VISIBLE_TEXT_PATTERN, rule: VISIBLE_TEXT_RULE });
