/**
 * 4,096 — values one HTTP JSON body may hold, object keys and containers included, as a mux
 * frame may (`Limits.maxValues`): a body of 1 MiB holding one object of 75,000 keys held the
 * host's event loop for up to 100 ms to parse, arrays nested 500,000 deep for up to 390 ms. The
 * bodies the routes take hold a few values (`{"answer": "…"}`: 3).
 */
export const JSON_BODY_MAX_VALUES = 4_096;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;

/** Space, tab, line feed and carriage return: the only whitespace JSON has between its tokens. */
function isJsonSpace(b: number): boolean {
  return b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
}

/**
 * Whether the JSON text in `bytes` holds more than `max` values, object keys and containers
 * included (`{"a":[1]}` holds 4), found from its punctuation alone: what `JSON.parse` costs grows
 * with the values it builds, not with the bytes (1 MiB holding one object of 75,000 keys, or
 * arrays nested 500,000 deep, took 27–390 ms to parse), so a body is counted before it is parsed.
 * Stops as soon as the count passes `max`; text that is no JSON is counted as far as it goes and
 * left to the parser to refuse.
 */
export function jsonValuesOver(bytes: Uint8Array, max: number): boolean {
  let values = 1;
  let inString = false;
  // after `{` or `[`: the next token other than its closer is the container's first value
  let opened = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
      continue;
    }
    if (opened && !isJsonSpace(b)) {
      opened = false;
      if (b !== CLOSE_OBJECT && b !== CLOSE_ARRAY) values++;
    }
    if (b === QUOTE) inString = true;
    else if (b === OPEN_OBJECT || b === OPEN_ARRAY) opened = true;
    // a comma starts the next item (or key), a colon a key's value
    else if (b === COMMA || b === COLON) values++;
    if (values > max) return true;
  }
  return false;
}
