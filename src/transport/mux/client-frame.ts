import {
  FrameId,
  isMethodName,
  type MethodName,
  Methods,
  paramsValidator,
  SessionmuxError,
  validator,
} from "../../../protocol/index.js";
import { cutUtf16 } from "../../../protocol/utf16-cut.js";

/** A client frame that passed every check of protocol-v1 §3 and §7; params are schema-valid. */
export type ClientRequest =
  | { type: "call" | "open"; id: number; method: MethodName; params: unknown }
  | { type: "close"; id: number };

/** Why a frame was refused; `id` is present only when the answer may be tied to that id. */
export interface FrameRefusal {
  refused: SessionmuxError;
  id?: number;
}

const frameId = validator(FrameId);

/**
 * Checks a decoded frame in the order of §7: map → id → duplicate → type → method → params.
 * A refusal carries the id only when that id is not in flight: an error frame with the id of a
 * running call or stream would end it on the client, disturbing it.
 *
 * A `call` naming a stream method, or an `open` naming a call method, is `unknown_method`:
 * there is no such call (or stream), just as for a name that does not exist.
 */
export function parseClientFrame(
  value: unknown,
  inFlight: (id: number) => boolean,
): ClientRequest | FrameRefusal {
  if (typeof value !== "object" || value === null || Array.isArray(value) || value instanceof Uint8Array) {
    return { refused: new SessionmuxError("bad_frame", "a frame must be a MessagePack map") };
  }
  const frame = value as Record<string, unknown>;
  if (!frameId.check(frame.id)) {
    return {
      refused: new SessionmuxError("bad_frame", "`id` must be a positive safe integer", {
        data: { field: "/id" },
      }),
    };
  }
  const id = frame.id;
  const type = frame.type;
  if (type === "close") return { type: "close", id };
  if (inFlight(id)) {
    return {
      refused: new SessionmuxError("duplicate_id", `id ${id} is already in flight; pick a new id`, {
        data: { id },
      }),
    };
  }
  if (type !== "call" && type !== "open") {
    return {
      id,
      refused: new SessionmuxError("bad_frame", "`type` must be call, open or close", {
        data: { field: "/type" },
      }),
    };
  }
  const method = frame.method;
  if (typeof method !== "string") {
    return {
      id,
      refused: new SessionmuxError("bad_frame", "`method` must be a string", { data: { field: "/method" } }),
    };
  }
  const wanted = type === "call" ? "call" : "stream";
  if (!isMethodName(method) || Methods[method].kind !== wanted) {
    const hint = isMethodName(method)
      ? ` (it is a ${Methods[method].kind}; use ${type === "call" ? "open" : "call"})`
      : "";
    return {
      id,
      refused: new SessionmuxError("unknown_method", `no ${wanted} method ${truncate(method)}${hint}`, {
        data: { method: truncate(method) },
      }),
    };
  }
  try {
    const params = paramsValidator(method).parse(frame.params ?? {});
    return { type, id, method, params };
  } catch (err) {
    return {
      id,
      refused: err instanceof SessionmuxError ? err : new SessionmuxError("bad_request", "invalid params"),
    };
  }
}

export function isRefusal(value: ClientRequest | FrameRefusal): value is FrameRefusal {
  return "refused" in value;
}

function truncate(s: string): string {
  return s.length > 128 ? `${cutUtf16(s, 128)}…` : s;
}
