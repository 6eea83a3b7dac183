import { type DecodeLimits, decodeFrame } from "../../../protocol/codec.js";
import { parseClientFrame } from "./client-frame.js";

// One widened copy per connection's limits object, so a refused frame builds no decoder of its own.
const widened = new WeakMap<DecodeLimits, DecodeLimits>();

/**
 * The id to answer a frame the decoder refused with, when its only fault is a string over the
 * decoder's string limit (protocol-v1 §7): a prompt's long text is a well-formed call whose client
 * waits for its answer, and an error frame without id would leave that call to time out (and the
 * SDK to send it again). The frame is read again with strings as long as the frame itself, which
 * bounds them anyway; any other fault, or an id missing, invalid or in flight (an error with it
 * would end the running call or stream), gives `undefined`: the refusal then goes untied.
 */
export function idOfOverlongStringFrame(
  bytes: Uint8Array,
  limits: DecodeLimits,
  inFlight: (id: number) => boolean,
): number | undefined {
  let wide = widened.get(limits);
  if (!wide) {
    wide = { ...limits, maxStrBytes: Number.MAX_SAFE_INTEGER };
    widened.set(limits, wide);
  }
  let value: unknown;
  try {
    value = decodeFrame(bytes, wide);
  } catch {
    return undefined;
  }
  const id = parseClientFrame(value, inFlight).id;
  return id !== undefined && !inFlight(id) ? id : undefined;
}
