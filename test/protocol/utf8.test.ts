import { describe, expect, it } from "vitest";
import { isValidUtf8 } from "../../protocol/utf8.js";

/**
 * The strict UTF-8 check the frame scanner runs on every string (protocol-v1 §3): RFC 3629,
 * judged here against the WHATWG decoder in fatal mode, which accepts exactly the same byte
 * sequences (no overlongs, no surrogates, nothing above U+10FFFF, no truncated sequence).
 */

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function decoderAccepts(bytes: Uint8Array): boolean {
  try {
    decoder.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

const whole = (bytes: number[]) => isValidUtf8(Uint8Array.from(bytes), 0, bytes.length);

/** The first few sequences among `sequences` where the check and the decoder disagree (none expected). */
function disagreements(sequences: Iterable<number[]>): string[] {
  const found: string[] = [];
  for (const seq of sequences) {
    if (whole(seq) !== decoderAccepts(Uint8Array.from(seq))) {
      found.push(seq.map((b) => b.toString(16).padStart(2, "0")).join(" "));
      if (found.length === 5) break;
    }
  }
  return found;
}

/** Bytes either side of each range a multi-byte sequence's bytes must fall in. */
const EDGES = [0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xff];

describe("isValidUtf8", () => {
  it("the boundaries RFC 3629 draws, by hand", () => {
    // ASCII ends at 0x7f; a lone continuation byte is no character
    expect(whole([0x7f])).toBe(true);
    expect(whole([0x80])).toBe(false);
    // two bytes: C0 and C1 would only be overlongs of ASCII; DF BF is U+07FF
    expect(whole([0xc1, 0xbf])).toBe(false);
    expect(whole([0xc2, 0x80])).toBe(true);
    expect(whole([0xdf, 0xbf])).toBe(true);
    // three bytes: E0 needs A0 or more (else overlong), ED at most 9F (else a surrogate)
    expect(whole([0xe0, 0x9f, 0xbf])).toBe(false);
    expect(whole([0xe0, 0xa0, 0x80])).toBe(true);
    expect(whole([0xed, 0x9f, 0xbf])).toBe(true);
    expect(whole([0xed, 0xa0, 0x80])).toBe(false);
    expect(whole([0xef, 0xbf, 0xbf])).toBe(true);
    // four bytes: F0 needs 90 or more (else overlong), F4 at most 8F (else above U+10FFFF)
    expect(whole([0xf0, 0x8f, 0xbf, 0xbf])).toBe(false);
    expect(whole([0xf0, 0x90, 0x80, 0x80])).toBe(true);
    expect(whole([0xf4, 0x8f, 0xbf, 0xbf])).toBe(true);
    expect(whole([0xf4, 0x90, 0x80, 0x80])).toBe(false);
    expect(whole([0xf5, 0x80, 0x80, 0x80])).toBe(false);
    // every byte of a sequence after the first must be a continuation byte
    expect(whole([0xe2, 0x82, 0x41])).toBe(false);
    expect(whole([0xf0, 0x9f, 0x98, 0x41])).toBe(false);
    expect(whole([0xf0, 0x9f, 0x41, 0x80])).toBe(false);
    expect(whole([])).toBe(true);
  });

  it("agrees with a fatal decoder on every one- and two-byte sequence", () => {
    function* sequences() {
      for (let a = 0; a < 256; a++) {
        yield [a];
        for (let b = 0; b < 256; b++) yield [a, b];
      }
    }
    expect(disagreements(sequences())).toEqual([]);
  });

  it("agrees with a fatal decoder on three- and four-byte sequences around every range edge", () => {
    const continuationEdges = [0x7f, 0x80, 0xbf, 0xc0];
    const everyByte = Array.from({ length: 256 }, (_, b) => b);
    function* sequences() {
      // from 0x80: a byte that opens no sequence must not be read as opening a longer one
      for (let lead = 0x80; lead < 256; lead++) {
        for (const b1 of lead >= 0xe0 ? everyByte : EDGES) {
          for (const b2 of EDGES) yield [lead, b1, b2];
          if (lead >= 0xe0 && lead < 0xf0) continue;
          for (const b2 of continuationEdges) {
            for (const b3 of continuationEdges) yield [lead, b1, b2, b3];
          }
        }
      }
    }
    expect(disagreements(sequences())).toEqual([]);
  });

  it("checks only bytes[from, to): a sequence cut by `to` is invalid though its rest follows", () => {
    for (const text of ["é", "€", "😀"]) {
      const encoded = new TextEncoder().encode(text);
      // a stray continuation byte before the window, the sequence's own bytes after each cut
      const bytes = Uint8Array.from([0x80, ...encoded, 0x80]);
      expect(isValidUtf8(bytes, 1, 1 + encoded.length)).toBe(true);
      for (let cut = 1; cut < encoded.length; cut++) {
        expect(isValidUtf8(bytes, 1, 1 + cut), `${text} cut after ${cut} bytes`).toBe(false);
      }
    }
    const mixed = new TextEncoder().encode("aé€😀z");
    expect(isValidUtf8(Uint8Array.from([0xff, ...mixed, 0xff]), 1, 1 + mixed.length)).toBe(true);
    // the window's first byte is where checking starts: the stray byte before it is not read
    expect(isValidUtf8(Uint8Array.from([0x80, 0x41]), 0, 2)).toBe(false);
    expect(isValidUtf8(Uint8Array.from([0x80, 0x41]), 1, 2)).toBe(true);
  });
});
