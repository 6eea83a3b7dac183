import type { HostFrame } from "../../protocol/index.js";

/**
 * The `HostFrame` schema of `protocol/frames.ts` as a hand-written check, so the browser bundle
 * carries no schema compiler (TypeBox's compiler is most of a client bundle and needs `new
 * Function`, which strict CSPs forbid). A property test keeps it equal to the schema.
 */
export function isHostFrame(value: unknown): value is HostFrame {
  if (!isRecord(value)) return false;
  switch (value.type) {
    case "hello":
      return (
        value.protocol === 1 &&
        typeof value.hostId === "string" &&
        typeof value.generation === "string" &&
        typeof value.serverTime === "number" &&
        Number.isFinite(value.serverTime) &&
        isOptionalCount(value.maxPayloadBytes) &&
        isOptionalCount(value.maxStrBytes)
      );
    case "result":
    case "item":
      return isFrameId(value.id) && "value" in value;
    case "end":
      return isFrameId(value.id);
    case "error":
      return (value.id === undefined || isFrameId(value.id)) && isWireError(value.error);
    case "event":
      return typeof value.name === "string" && "value" in value;
    default:
      return false;
  }
}

/** An optional limit of the `hello`: absent (an older host), or a whole number of at least 1. */
function isOptionalCount(value: unknown): boolean {
  return value === undefined || (Number.isInteger(value) && (value as number) >= 1);
}

const CATEGORIES: ReadonlySet<unknown> = new Set(["protocol", "business", "internal"]);

function isWireError(value: unknown): boolean {
  return (
    isRecord(value) &&
    typeof value.code === "string" &&
    typeof value.message === "string" &&
    CATEGORIES.has(value.category) &&
    typeof value.retryable === "boolean"
  );
}

/** §3 frame ids: positive safe integers. */
function isFrameId(value: unknown): boolean {
  return Number.isSafeInteger(value) && (value as number) >= 1;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
