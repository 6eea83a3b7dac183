/**
 * Characters that show nothing on their own: whitespace (JavaScript's `\s`, the Unicode spaces and
 * the byte order mark included), C0 and C1 controls, and the zero-width, joiner, direction, filler
 * and variation-selector characters. A text made only of these renders as a blank row.
 */
const INVISIBLE =
  "\\s\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u034f\\u061c\\u115f\\u1160\\u17b4\\u17b5" +
  "\\u180b-\\u180f\\u200b-\\u200f\\u202a-\\u202e\\u2060-\\u206f\\u3164\\ufe00-\\ufe0f\\uffa0\\ufff0-\\ufffb";

/**
 * Matches a text holding at least one visible character. Written for a `RegExp` without flags
 * (how a schema's `pattern` is compiled) and valid under an HTML `pattern` attribute's `v` flag.
 */
export const VISIBLE_TEXT_PATTERN = `[^${INVISIBLE}]`;
const visible = new RegExp(VISIBLE_TEXT_PATTERN);

/** The rule a refused text is told, after its field: `params/title: must contain …`. */
export const VISIBLE_TEXT_RULE =
  "must contain a visible character, not only whitespace or invisible characters";

export function hasVisibleText(text: string): boolean {
  return visible.test(text);
}
