import { decode, encode } from "@msgpack/msgpack";
import type { ForwardedCall, ForwardReply } from "../call-inbox.js";

/** The part of a forwarded call its row's `body` holds: what the owner runs, as whom. */
export type ForwardedCallBody = Pick<ForwardedCall, "principal" | "method" | "params">;

/** A forwarded call's `body`, as its sender writes it. */
export function encodeCallBody(call: ForwardedCall): Uint8Array {
  return encode(
    { principal: call.principal, method: call.method, params: call.params },
    { ignoreUndefined: true },
  );
}

/** A forwarded call's `body` as its owner reads it. */
export function decodeCallBody(body: Buffer): ForwardedCallBody {
  return decode(plain(body)) as ForwardedCallBody;
}

/** A forwarded call's `reply`, as its owner writes it. */
export function encodeReply(reply: ForwardReply): Uint8Array {
  return encode(reply, { ignoreUndefined: true });
}

/** A forwarded call's `reply` as its sender reads it. */
export function decodeReply(reply: Buffer): ForwardReply {
  return decode(plain(reply)) as ForwardReply;
}

/** Decoded bytes then come back as plain Uint8Arrays, as the wire gives them, not as Buffers. */
function plain(bytes: Buffer): Uint8Array {
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
