import type { ControlItem } from "../../protocol/index.js";

type BaselineItem = Extract<ControlItem, { kind: "baseline" }>;

/**
 * A control baseline asked for in parts (protocol-v1 §5, `baselineParts`), put together again:
 * the parts are kept until the one without `more`, and only then is the whole baseline given out,
 * so a mirror never shows part of a baseline as the host's state. A baseline in one item passes
 * as it is. Forget the parts kept when the stream is lost: the next stream sends a new baseline.
 */
export class BaselineAssembly {
  #parts: BaselineItem[] = [];

  /** The whole baseline once `part` is its last, else undefined (the part is kept). */
  add(part: BaselineItem): BaselineItem | undefined {
    if (part.more !== true && this.#parts.length === 0) return part;
    this.#parts.push(part);
    if (part.more === true) return undefined;
    const parts = this.#parts;
    this.#parts = [];
    return joinParts(parts);
  }

  /** Drops the parts kept so far (the stream carrying them was lost). */
  reset(): void {
    this.#parts = [];
  }
}

/**
 * Each array field is every part's entries in order; every other field (`kind`, `generation`) is
 * the last part's. Array fields a newer host adds are joined the same way.
 */
function joinParts(parts: readonly BaselineItem[]): BaselineItem {
  const joined: Record<string, unknown> = {};
  for (const part of parts) {
    for (const [key, value] of Object.entries(part)) {
      if (key === "more") continue;
      if (!Array.isArray(value)) joined[key] = value;
      else {
        const entries = (joined[key] as unknown[] | undefined) ?? [];
        for (const entry of value) entries.push(entry);
        joined[key] = entries;
      }
    }
  }
  return joined as BaselineItem;
}
