import { decodeFrame } from "../../protocol/codec.js";
import { SessionmuxError } from "../../protocol/errors.js";
import type { HostFrame } from "../../protocol/index.js";
import { isHostFrame } from "./host-frame-check.js";

/**
 * The host is trusted more than a peer is trusted by the host: these limits only guard against a
 * runaway frame, and are wide enough for every value the host may legitimately send.
 */
const CLIENT_DECODE_LIMITS = {
  maxStrBytes: 16 * 1024 * 1024,
  maxBinBytes: 16 * 1024 * 1024,
  maxArrayLength: 1_000_000,
  maxMapLength: 100_000,
  maxDepth: 256,
  // a value takes a byte at least: the message size bounds them
  maxValues: Number.POSITIVE_INFINITY,
} as const;

/**
 * The largest host message a client accepts: a value of the largest binary above plus its frame
 * (an attachment of up to 10 MiB by default, `--max-upload-bytes` on the host). The host's own
 * 1 MiB limit is for what peers send it.
 */
export const MAX_HOST_MESSAGE_BYTES = CLIENT_DECODE_LIMITS.maxBinBytes + 1024 * 1024;

/**
 * One message from the host: a valid frame, or an `invalid_host_frame` error and the id it names
 * if readable, or a `hello` of another protocol version (`unsupported_protocol`, its `protocol`).
 */
export type HostFrameReading =
  | { readonly ok: true; readonly frame: HostFrame }
  | {
      readonly ok: false;
      readonly error: SessionmuxError;
      readonly id: number | undefined;
      readonly protocol?: number;
    };

/** Decodes and validates one WebSocket message from the host (§2, §3). */
export function readHostFrame(data: unknown): HostFrameReading {
  if (!(data instanceof ArrayBuffer)) return invalid("a text frame (v1 frames are binary)", undefined);
  let frame: unknown;
  try {
    frame = decodeFrame(new Uint8Array(data), CLIENT_DECODE_LIMITS);
  } catch (cause) {
    return invalid("an undecodable frame", undefined, cause);
  }
  if (isHostFrame(frame)) return { ok: true, frame };
  const { id, type, protocol } = (frame ?? {}) as { id?: unknown; type?: unknown; protocol?: unknown };
  // a host of another version may change the rest of its hello too: the version alone decides
  if (type === "hello" && Number.isInteger(protocol) && protocol !== 1) {
    return {
      ok: false,
      error: unsupportedProtocol(protocol as number),
      id: undefined,
      protocol: protocol as number,
    };
  }
  const readable = Number.isSafeInteger(id) && (id as number) > 0 ? (id as number) : undefined;
  return invalid(`an invalid ${typeof type === "string" ? `"${type}" ` : ""}frame`, readable);
}

/** The error of a host speaking protocol `protocol`, which this client (v1) cannot. */
export function unsupportedProtocol(protocol: number): SessionmuxError {
  return new SessionmuxError(
    "unsupported_protocol",
    `the host speaks protocol ${protocol}, this client protocol 1: use a client of the host's version`,
    { data: { protocol } },
  );
}

function invalid(what: string, id: number | undefined, cause?: unknown): HostFrameReading {
  const error = new SessionmuxError(
    "invalid_host_frame",
    `the host sent ${what}; the client cannot read it`,
    {
      data: id === undefined ? undefined : { id },
      cause,
    },
  );
  return { ok: false, error, id };
}
