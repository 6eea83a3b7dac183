/** Strict UTF-8 (RFC 3629) over `bytes[from, to)`: no overlongs, no surrogates, nothing above U+10FFFF. */
export function isValidUtf8(bytes: Uint8Array, from: number, to: number): boolean {
  let i = from;
  while (i < to) {
    const b0 = bytes[i] as number;
    if (b0 < 0x80) {
      i++;
      continue;
    }
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      if (i + 1 >= to || !isCont(bytes[i + 1])) return false;
      i += 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      if (i + 2 >= to) return false;
      const b1 = bytes[i + 1] as number;
      if (b0 === 0xe0 && b1 < 0xa0) return false; // overlong
      if (b0 === 0xed && b1 > 0x9f) return false; // surrogate
      if (!isCont(b1) || !isCont(bytes[i + 2])) return false;
      i += 3;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      if (i + 3 >= to) return false;
      const b1 = bytes[i + 1] as number;
      if (b0 === 0xf0 && b1 < 0x90) return false; // overlong
      if (b0 === 0xf4 && b1 > 0x8f) return false; // above U+10FFFF
      if (!isCont(b1) || !isCont(bytes[i + 2]) || !isCont(bytes[i + 3])) return false;
      i += 4;
    } else {
      return false;
    }
  }
  return true;
}

function isCont(b: number | undefined): boolean {
  return b !== undefined && (b & 0xc0) === 0x80;
}
