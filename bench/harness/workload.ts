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

/** The send time a `deltaEvent` carries, or NaN. */
export function sentAt(text: unknown): number {
  return typeof text === "string" ? Number.parseFloat(text) : Number.NaN;
}

/** Session ids shared by every subject. */
export function sessionIds(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `bench-${i}`);
}
