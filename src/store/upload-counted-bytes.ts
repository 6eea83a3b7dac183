/**
 * 4 KiB — what an upload counts toward its principal's upload quota at least, an empty one too:
 * each is a row of its own (its id, name and type), so the quota also bounds how many a principal
 * holds (16,384 at the default quota). Counted at its size, an empty upload cost nothing, and one
 * principal could store rows without end. Not in `Limits`: no client needs it, and the browser
 * bundle carries every entry of `Limits`.
 */
export const UPLOAD_MIN_COUNTED_BYTES = 4096;
