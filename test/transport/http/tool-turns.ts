import type { NewEvent } from "../../../protocol/index.js";
import { turnEnd, turnStart } from "../../store/open-store.js";

export const KIB = 1024;
export const MIB = 1024 * KIB;

/** One turn whose tool returned `kib` KiB of text: about that much stored event data. */
export const toolTurn = (turnId: string, kib: number): NewEvent[] => [
  turnStart(turnId),
  { type: "tool/call", data: { turnId, toolCallId: `${turnId}c`, name: "cat", args: {} } },
  {
    type: "tool/result",
    data: { turnId, toolCallId: `${turnId}c`, ok: true, result: "r".repeat(kib * KIB), durationMs: 1 },
  } as NewEvent,
  turnEnd(turnId),
];
