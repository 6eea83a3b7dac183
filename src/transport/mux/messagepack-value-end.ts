/**
 * Where the MessagePack value starting at `start` ends (exclusive), found by reading only type
 * bytes and length fields, never the contents: for bytes the host encoded itself (a replay array's
 * events), so nothing is validated beyond their being complete. Iterative, as deep nesting costs
 * a counter; no allocation and one `switch`, as it runs for every event a follower is sent in
 * pieces. Throws a `RangeError` on truncated bytes or the unused type byte 0xc1.
 */
export function messagePackValueEnd(bytes: Uint8Array, start: number): number {
  let pos = start;
  let left = 1;
  while (left > 0) {
    left--;
    const b = uintAt(bytes, pos, 1);
    pos++;
    if (b <= 0x7f || b >= 0xe0) continue; // fixint
    if (b <= 0x8f) left += (b & 0x0f) * 2;
    else if (b <= 0x9f) left += b & 0x0f;
    else if (b <= 0xbf) pos += b & 0x1f;
    else
      switch (b) {
        case 0xc0:
        case 0xc2:
        case 0xc3:
          break;
        case 0xcc:
        case 0xd0:
          pos += 1;
          break;
        case 0xcd:
        case 0xd1:
          pos += 2;
          break;
        case 0xca:
        case 0xce:
        case 0xd2:
          pos += 4;
          break;
        case 0xcb:
        case 0xcf:
        case 0xd3:
          pos += 8;
          break;
        // fixext: a type byte and 1, 2, 4, 8 or 16 bytes
        case 0xd4:
          pos += 2;
          break;
        case 0xd5:
          pos += 3;
          break;
        case 0xd6:
          pos += 5;
          break;
        case 0xd7:
          pos += 9;
          break;
        case 0xd8:
          pos += 17;
          break;
        // strings and binaries: their length, then their bytes
        case 0xc4:
        case 0xd9:
          pos += 1 + uintAt(bytes, pos, 1);
          break;
        case 0xc5:
        case 0xda:
          pos += 2 + uintAt(bytes, pos, 2);
          break;
        case 0xc6:
        case 0xdb:
          pos += 4 + uintAt(bytes, pos, 4);
          break;
        // extensions: their length, a type byte, then their bytes
        case 0xc7:
          pos += 2 + uintAt(bytes, pos, 1);
          break;
        case 0xc8:
          pos += 3 + uintAt(bytes, pos, 2);
          break;
        case 0xc9:
          pos += 5 + uintAt(bytes, pos, 4);
          break;
        case 0xdc:
          left += uintAt(bytes, pos, 2);
          pos += 2;
          break;
        case 0xdd:
          left += uintAt(bytes, pos, 4);
          pos += 4;
          break;
        case 0xde:
          left += uintAt(bytes, pos, 2) * 2;
          pos += 2;
          break;
        case 0xdf:
          left += uintAt(bytes, pos, 4) * 2;
          pos += 4;
          break;
        default:
          throw new RangeError(`MessagePack type byte 0x${b.toString(16)} at byte ${pos - 1}`);
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
