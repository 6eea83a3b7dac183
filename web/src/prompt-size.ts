import { Limits } from "../../protocol/limits.js";

/**
 * The most UTF-8 bytes of text one prompt may carry, before the host said: every string of a frame
 * must fit the host's decoder (protocol-v1 §2 and §7, 64 KiB unless the host is told otherwise, and
 * its `hello` says what it reads). Past it the host refuses the call as `bad_frame`, and past its
 * frame limit it would close the socket, which the SDK reopens and sends the prompt on again, so
 * the console would flap offline for ever.
 */
export const DEFAULT_PROMPT_BYTES = Limits.maxStrBytes;

const encoder = new TextEncoder();

/**
 * Why `text` cannot be sent as one prompt to a host that reads strings of at most `maxBytes`
 * UTF-8 bytes, in the operator's words; undefined when it can.
 */
export function promptTooLong(text: string, maxBytes: number = DEFAULT_PROMPT_BYTES): string | undefined {
  // a character takes at most 3 UTF-8 bytes per UTF-16 unit: most texts need no encoding at all
  if (text.length * 3 <= maxBytes) return undefined;
  const bytes = encoder.encode(text).length;
  if (bytes <= maxBytes) return undefined;
  const kib = (n: number) => `${Math.ceil(n / 1024).toLocaleString("en")} KiB`;
  return `This message is ${kib(bytes)} long; the host takes at most ${kib(maxBytes)} of text in one message. Shorten it or send it in parts: nothing was sent.`;
}
