/**
 * The first `max` UTF-16 units of `text`, one fewer when the last would be the first half of a
 * surrogate pair: a half alone is no character, and where it is stored as UTF-8 (the log, a
 * frame) it turns into U+FFFD while the copy in memory keeps the half, so the two would disagree.
 */
export function cutUtf16(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}
