/** The demo agent's commands; anything else is plain text to echo. */
export type DemoCommand =
  | { kind: "text"; text: string }
  | { kind: "stream"; count: number; ms: number }
  | { kind: "approve"; action: string }
  | { kind: "ask"; question: string }
  | { kind: "job"; seconds: number }
  | { kind: "fail" }
  | { kind: "sleep"; ms: number };

const MAX_STREAM = 100_000;
const MAX_WAIT_MS = 600_000;

export function parseDemoCommand(text: string): DemoCommand {
  const trimmed = text.trim();
  const match = /^\/(\w+)(?:\s+([\s\S]*))?$/.exec(trimmed);
  if (!match) return { kind: "text", text };
  const [, name, rest = ""] = match;
  const args = rest.trim();
  // no arguments is no numbers: "".split() gives [""], and Number("") is 0, not a missing count
  const numbers = args === "" ? [] : args.split(/\s+/).map(Number);
  switch (name) {
    case "stream":
      return {
        kind: "stream",
        count: bounded(numbers[0], 5, 0, MAX_STREAM),
        ms: bounded(numbers[1], 10, 0, MAX_WAIT_MS),
      };
    case "approve":
      return { kind: "approve", action: args || "proceed" };
    case "ask":
      return { kind: "ask", question: args || "Continue?" };
    case "job":
      return { kind: "job", seconds: Math.min(Math.max(Number(numbers[0]) || 1, 0), MAX_WAIT_MS / 1000) };
    case "fail":
      return { kind: "fail" };
    case "sleep":
      return { kind: "sleep", ms: bounded(numbers[0], 1000, 0, MAX_WAIT_MS) };
    default:
      return { kind: "text", text };
  }
}

function bounded(value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined || !Number.isFinite(value)) return fallback;
  return Math.min(Math.max(Math.floor(value), min), max);
}
