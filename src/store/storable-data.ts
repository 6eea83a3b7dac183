import { Limits, type NewEvent, type SessionEvent, SessionmuxError } from "../../protocol/index.js";
import { encodeValue } from "./event-codec.js";
import type { TimedEvent } from "./log-writer.js";

/** Keys every wire decoder refuses (protocol/codec.ts), so no client could ever read them back. */
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/**
 * How deep event data may nest (the data itself is level 0). Every key down to it is checked, and
 * a page or a follow frame around data this deep is still well inside what the host's encoder
 * (100 levels) and every client's decoder take.
 */
export const MAX_DATA_DEPTH = 64;

/** Why one event's data may not be stored: a key no decoder takes, or nesting past the limit. */
type Unstorable = { key: string } | { depth: number };

/**
 * Refuses event data that a client's decoder would refuse, or that no frame could carry: stored
 * bytes are spliced into frames as they are, so one such key (say, in a model's tool arguments)
 * or one such nesting would make every later read of the session fail. Throws `bad_request`
 * naming the event; nothing is written.
 */
export function assertStorable(events: readonly NewEvent[]): void {
  for (let i = 0; i < events.length; i++) {
    const found = unstorableIn(events[i]!.data, 0);
    if (found === undefined) continue;
    const field = `/events/${i}/data`;
    if ("key" in found) {
      throw new SessionmuxError(
        "bad_request",
        `event ${i} carries the key "${found.key}", which no client may decode`,
        { data: { field, key: found.key } },
      );
    }
    throw new SessionmuxError(
      "bad_request",
      `event ${i} nests deeper than ${found.depth} levels, which no frame may carry`,
      { data: { field, depth: found.depth } },
    );
  }
}

function unstorableIn(value: unknown, depth: number): Unstorable | undefined {
  if (value === null || typeof value !== "object" || ArrayBuffer.isView(value)) return undefined;
  if (depth > MAX_DATA_DEPTH) return { depth: MAX_DATA_DEPTH };
  if (Array.isArray(value)) {
    for (const item of value) {
      const found = unstorableIn(item, depth + 1);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  for (const key of Object.keys(value)) {
    if (FORBIDDEN_KEYS.has(key)) return { key };
    const found = unstorableIn((value as Record<string, unknown>)[key], depth + 1);
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

/** The event `input` becomes at `seq`, and its data as stored (MessagePack), refused past the size limit. */
export function storedEvent(
  seq: number,
  input: TimedEvent,
  at: number,
): { event: SessionEvent; bytes: Uint8Array } {
  const event = { seq, at: input.at ?? at, type: input.type, data: input.data } as SessionEvent;
  const bytes = encodeValue(input.data);
  assertEventSize(bytes, event.type);
  return { event, bytes };
}
