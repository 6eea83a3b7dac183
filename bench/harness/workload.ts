import { wallNow } from "./stats.js";

/** The one event shape every subject carries: a streamed assistant chunk of about 80 bytes. */
export interface DeltaEvent {
  type: "assistant/delta";
  data: { turnId: string; text: string };
}

/** `text` starts with the wall-clock send time so a follower in another process can measure latency. */
export function deltaEvent(index: number): DeltaEvent {
  return {
    type: "assistant/delta",
    data: { turnId: "t1", text: `${wallNow().toFixed(3)}|chunk ${index} of a streamed answer, lorem ipsum` },
  };
}

const FILLER = "lorem ipsum dolor sit amet ".repeat(64);

/** A `deltaEvent` whose text is padded to about `bytes`: fewer events for the same bytes on the wire. */
export function paddedDeltaEvent(index: number, bytes: number): DeltaEvent {
  const event = deltaEvent(index);
  const missing = Math.max(0, bytes - event.data.text.length);
  event.data.text += FILLER.repeat(Math.ceil(missing / FILLER.length)).slice(0, missing);
  return event;
}

/** The send time a `deltaEvent` carries, or NaN. */
export function sentAt(text: unknown): number {
  return typeof text === "string" ? Number.parseFloat(text) : Number.NaN;
}

/** Session ids shared by every subject. */
export function sessionIds(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `bench-${i}`);
}
