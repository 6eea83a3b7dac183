import { cutUtf16 } from "../../protocol/utf16-cut.js";

/** An option's value as a refusal quotes it: short, and never a throw of its own. */
export function describeOptionValue(value: unknown): string {
  if (typeof value === "function") return `a function ${value.name}`.trimEnd();
  if (typeof value === "number" || value === undefined) return String(value);
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > 64 ? `${cutUtf16(text, 64)}…` : text;
}
