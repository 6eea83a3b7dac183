import type { TurnOutcome } from "../agents/agent.js";

const OUTCOME_STATES: ReadonlySet<unknown> = new Set<TurnOutcome["state"]>([
  "completed",
  "failed",
  "cancelled",
]);

/**
 * The agent's outcome as the log records it, or a failure when it is none: an agent in plain
 * JavaScript may resolve with nothing, an unknown state or an `error` that is no string, and its
 * turn must still end (a host waits for every turn to end) with a `turn/end` its schema allows.
 */
export function checkedOutcome(ran: unknown): TurnOutcome {
  const given = typeof ran === "object" && ran !== null ? (ran as { state?: unknown; error?: unknown }) : {};
  if (!OUTCOME_STATES.has(given.state)) {
    return {
      state: "failed",
      error: `the agent returned no turn outcome (${describe(ran)}); runTurn resolves with { state: "completed" | "failed" | "cancelled", error? }`,
    };
  }
  const state = given.state as TurnOutcome["state"];
  if (given.error === undefined) return { state };
  return { state, error: typeof given.error === "string" ? given.error : describe(given.error) };
}

function describe(value: unknown): string {
  if (value instanceof Error) return value.message || value.name;
  if (value === undefined || typeof value !== "object") return String(value);
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
