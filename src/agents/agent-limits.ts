import { describeOptionValue } from "../embed/option-value.js";

/**
 * What one model may make the host hold during a turn. A model that goes past a bound ends the
 * turn `failed` with an {@link AgentLimitError}, whose code leads the turn's error message.
 */
export interface AgentLimits {
  /** Model calls in one turn (each tool round trip is one more). @default 16 */
  maxStepsPerTurn: number;
  /** Tool calls the model may ask for in one step. @default 16 */
  maxToolCallsPerStep: number;
  /** Characters of text, reasoning and tool input streamed in one step. @default 1_000_000 */
  maxStepChars: number;
  /**
   * Characters of the earlier turns' messages sent with each model call: the newest whole turns
   * that fit, so a long session keeps within the model's context rather than failing every turn.
   * @default 200_000 (about 50,000 tokens)
   */
  maxHistoryChars: number;
  /**
   * The longest wait for the model's next streamed part, the first included (so the SDK's retries
   * of a call that failed before streaming wait within it): a model that goes quiet longer fails
   * the turn instead of holding it, and the session's queue, forever. @default 300_000
   */
  modelIdleMs: number;
  /**
   * How long one tool call may run unless its tool sets `timeoutMs`: past it the call's signal is
   * aborted, a failed `tool/result` (`tool_timeout: …`) recorded, and the turn goes on without
   * waiting for it. @default 600_000
   */
  toolTimeoutMs: number;
}

export const DEFAULT_AGENT_LIMITS: AgentLimits = {
  maxStepsPerTurn: 16,
  maxToolCallsPerStep: 16,
  maxStepChars: 1_000_000,
  maxHistoryChars: 200_000,
  modelIdleMs: 300_000,
  toolTimeoutMs: 600_000,
};

/** Each limit's least value; the two waits may also be `Infinity` (no bound). */
const LEAST: Readonly<Record<keyof AgentLimits, number>> = {
  maxStepsPerTurn: 1,
  maxToolCallsPerStep: 1,
  maxStepChars: 1,
  maxHistoryChars: 0,
  modelIdleMs: 1,
  toolTimeoutMs: 1,
};
const WAITS: ReadonlySet<keyof AgentLimits> = new Set(["modelIdleMs", "toolTimeoutMs"]);

/**
 * A wait of at least 1 ms, or `Infinity` for none: what a tool's `timeoutMs` and the agent's
 * waits take. `null` when `value` is one, else what it must be.
 */
export function waitRule(value: unknown): string | null {
  return value === Number.POSITIVE_INFINITY || (Number.isSafeInteger(value) && (value as number) >= 1)
    ? null
    : "a whole number of ms from 1, or Infinity";
}

/**
 * The defaults with the limits given over them, each checked: a value that is no whole number in
 * its range (`NaN` from an unset variable, a string, 0 steps) throws a TypeError naming it, where it
 * would have switched the bound off or failed every turn.
 */
export function resolveAgentLimits(given: Partial<AgentLimits> = {}): AgentLimits {
  const limits: AgentLimits = { ...DEFAULT_AGENT_LIMITS };
  for (const [name, value] of Object.entries(given) as [keyof AgentLimits, unknown][]) {
    if (!(name in LEAST)) throw new TypeError(`limits.${name} is not an agent limit`);
    if (value === undefined) continue;
    const wrong = WAITS.has(name)
      ? waitRule(value)
      : Number.isSafeInteger(value) && (value as number) >= LEAST[name]
        ? null
        : `a whole number from ${LEAST[name]}`;
    // the value as JSON: a string "8" shown as `got 8` reads as a value the rule takes
    if (wrong !== null)
      throw new TypeError(`limits.${name} must be ${wrong}, got ${describeOptionValue(value)}`);
    limits[name] = value as number;
  }
  return limits;
}

export type AgentLimitCode = "too_many_steps" | "too_many_tool_calls" | "step_too_long" | "model_stalled";

/** A model went past one of the {@link AgentLimits}; the turn fails and nothing more is streamed. */
export class AgentLimitError extends Error {
  readonly code: AgentLimitCode;
  readonly limit: number;

  constructor(code: AgentLimitCode, limit: number, message: string) {
    super(`${code}: ${message}`);
    this.name = "AgentLimitError";
    this.code = code;
    this.limit = limit;
  }
}
