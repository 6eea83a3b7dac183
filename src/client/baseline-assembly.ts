import { SessionmuxError } from "../../protocol/errors.js";
import type { ControlItem } from "../../protocol/index.js";

type BaselineItem = Extract<ControlItem, { kind: "baseline" }>;

/**
 * What the parts of one baseline may hold before its last: parts, and characters of their JSON.
 * A host sends parts of at most 64 KiB (one larger entry alone), so these are far past any
 * baseline a host holds; past them the host is not keeping to the protocol, and the client
 * would otherwise keep every part of a baseline that never ends.
 */
const MAX_PARTS = 4096;
const MAX_CHARS = 64 * 1024 * 1024;

/**
 * A control baseline asked for in parts (protocol-v1 §5, `baselineParts`), put together again:
 * the parts are kept until the one without `more`, and only then is the whole baseline given out,
 * so a mirror never shows part of a baseline as the host's state. A baseline in one item passes
 * as it is. Forget the parts kept when the stream is lost: the next stream sends a new baseline.
 */
export class BaselineAssembly {
  #parts: BaselineItem[] = [];
  #chars = 0;

  /**
   * The whole baseline once `part` is its last, else undefined (the part is kept), or an
   * `invalid_host_frame` error once the parts kept pass `MAX_PARTS` or `MAX_CHARS` (they are dropped).
   */
  add(part: BaselineItem): BaselineItem | SessionmuxError | undefined {
    if (part.more !== true && this.#parts.length === 0) return part;
    this.#chars += JSON.stringify(part).length;
    if (this.#parts.push(part) > MAX_PARTS || this.#chars > MAX_CHARS) {
      this.reset();
      return new SessionmuxError(
        "invalid_host_frame",
        "the host sent session.control a baseline past the client's bound",
        { data: { method: "session.control" } },
      );
    }
    if (part.more === true) return undefined;
    const parts = this.#parts;
    this.reset();
    return joinParts(parts);
  }

  /** Drops the parts kept so far (the stream carrying them was lost). */
  reset(): void {
    this.#parts = [];
    this.#chars = 0;
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
