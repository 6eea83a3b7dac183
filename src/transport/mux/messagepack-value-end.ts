import * as typeBytes from "../../../protocol/msgpack-type-bytes.js";

// Copied into this module's own constants: Node reads an imported binding through the exporting
// module on every use, which made this loop half as slow again.
const { ARRAY, EXTENSION, MAP, RESERVED, LENGTH_FIELD_BYTES, TYPE_BYTE_KIND, TYPE_BYTE_LENGTH } = typeBytes;

/**
 * Where the MessagePack value starting at `start` ends (exclusive), found by reading only type
 * bytes and length fields, never the contents: for bytes the host encoded itself (a replay array's
 * events), so nothing is validated beyond their being complete. Iterative, as deep nesting costs
 * a counter; no allocation and a look-up per type byte, as it runs for every event a follower is
 * sent in pieces. Throws a `RangeError` on truncated bytes or the unused type byte 0xc1.
 */
export function messagePackValueEnd(bytes: Uint8Array, start: number): number {
  let pos = start;
  let left = 1;
  while (left > 0) {
    left--;
    const b = uintAt(bytes, pos, 1);
    pos++;
    const field = LENGTH_FIELD_BYTES[b]!;
    const length = field === 0 ? TYPE_BYTE_LENGTH[b]! : uintAt(bytes, pos, field as 1 | 2 | 4);
    pos += field;
    switch (TYPE_BYTE_KIND[b]) {
      case ARRAY:
        left += length;
        break;
      case MAP:
        left += length * 2;
        break;
      case EXTENSION:
        pos += 1 + length;
        break;
      case RESERVED:
        throw new RangeError(`MessagePack type byte 0x${b.toString(16)} at byte ${pos - 1}`);
      default:
        // scalars, strings and binaries: their bytes
        pos += length;
    }
  }
  if (pos > bytes.length) throw new RangeError(`truncated MessagePack at byte ${bytes.length}`);
  return pos;
}

/** The big-endian unsigned integer of `width` bytes at `pos`. */
function uintAt(bytes: Uint8Array, pos: number, width: 1 | 2 | 4): number {
  if (pos + width > bytes.length) throw new RangeError(`truncated MessagePack at byte ${pos}`);
  if (width === 1) return bytes[pos]!;
  if (width === 2) return (bytes[pos]! << 8) | bytes[pos + 1]!;
  return bytes[pos]! * 0x1000000 + ((bytes[pos + 1]! << 16) | (bytes[pos + 2]! << 8) | bytes[pos + 3]!);
}
