import type { SessionEvent } from "../../protocol/index.js";

/** JSON with `Uint8Array` as base64, so binary event data survives one line of text. */
export function jsonLine(value: unknown): string {
  return `${JSON.stringify(value, (_key, v: unknown) =>
    v instanceof Uint8Array ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64") : v,
  )}\n`;
}

/** One event as printed by `follow`: exactly `{"seq","type","at","data"}` in that order. */
export function eventLine(event: SessionEvent): string {
  return jsonLine({ seq: event.seq, type: event.type, at: event.at, data: event.data });
}
