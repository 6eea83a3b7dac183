/**
 * The MessagePack decoder's limits for untrusted frames (protocol-v1 §7), apart from `Limits`:
 * the codec reads only these, so a browser bundle of the client SDK carries them and not every
 * limit of the host.
 */
export interface DecodeLimits {
  /** @default 64 KiB — UTF-8 bytes of one string. */
  maxStrBytes: number;
  /** @default 1 MiB — bytes of one binary. */
  maxBinBytes: number;
  /** @default 10,000 — elements of one array. */
  maxArrayLength: number;
  /** @default 1,000 — entries of one map. */
  maxMapLength: number;
  /** @default 32 — nested arrays and maps; the top-level map is depth 1. */
  maxDepth: number;
  /** @default 4,096 — values of one frame in all, map keys and containers included. */
  maxValues: number;
}

export const DEFAULT_DECODE_LIMITS: Readonly<DecodeLimits> = Object.freeze({
  maxStrBytes: 64 * 1024,
  maxBinBytes: 1024 * 1024,
  maxArrayLength: 10_000,
  maxMapLength: 1_000,
  maxDepth: 32,
  /**
   * 4,096 — values one client frame holds in all: every array, map, map key and other value
   * counts one, the frame's own map too (a map of n entries is 2n + 1). Decoding costs by values,
   * not bytes, and the limits above bound containers one at a time, so a frame of 1 MiB could
   * hold 90,000 map entries (about 100 ms of the host's event loop to decode) or a million small
   * values. The largest frame the methods' params allow (a prompt with 32 attachments and every
   * optional field) holds 261; at this bound a frame decodes in a few milliseconds at most.
   */
  maxValues: 4_096,
});
