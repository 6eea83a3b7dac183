import { Limits, type NewEvent, SessionmuxError } from "../../protocol/index.js";

/** Keys every wire decoder refuses (protocol/codec.ts), so no client could ever read them back. */
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/**
 * Refuses event data that a client's decoder would refuse: stored bytes are spliced into frames
 * as they are, so one such key (say, in a model's tool arguments) would make every later read of
 * the session fail. Throws `bad_request` naming the event; nothing is written.
 */
export function assertStorable(events: readonly NewEvent[]): void {
  for (let i = 0; i < events.length; i++) {
    const key = forbiddenKeyIn(events[i]!.data, 0);
    if (key !== undefined) {
      throw new SessionmuxError(
        "bad_request",
        `event ${i} carries the key "${key}", which no client may decode`,
        {
          data: { field: `/events/${i}/data`, key },
        },
      );
    }
  }
}

function forbiddenKeyIn(value: unknown, depth: number): string | undefined {
  if (value === null || typeof value !== "object" || ArrayBuffer.isView(value) || depth > 64)
    return undefined;
  if (Array.isArray(value)) {
    for (const item of value) {
      const found = forbiddenKeyIn(item, depth + 1);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const key of Object.keys(value)) {
    if (FORBIDDEN_KEYS.has(key)) return key;
    const found = forbiddenKeyIn((value as Record<string, unknown>)[key], depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * Refuses an event whose encoded data is over `Limits.maxEventBytes`: no reader could take it in
 * one message. Thrown inside the write, so its transaction writes nothing (the group commit runs
 * the other writes of the batch again without it).
 */
export function assertEventSize(bytes: Uint8Array, type: string): void {
  if (bytes.byteLength <= Limits.maxEventBytes) return;
  throw new SessionmuxError(
    "payload_too_large",
    `a ${type} event of ${bytes.byteLength} bytes is over the ${Limits.maxEventBytes}-byte limit`,
    { data: { type, bytes: bytes.byteLength, limit: Limits.maxEventBytes } },
  );
}
