import { type FlexibleSchema, type JSONSchema7, jsonSchema, type ToolSet, tool } from "ai";
import { describeOptionValue } from "../embed/option-value.js";
import { waitRule } from "./agent-limits.js";

/** What a tool's `execute` gets beside its input. */
export interface ToolRunContext {
  readonly sessionId: string;
  readonly turnId: string;
  readonly toolCallId: string;
  /** Aborted when the turn is (cancel, delete, shutdown), or when the call runs out of time. */
  readonly signal: AbortSignal;
}

/**
 * A tool the model may call. Its input schema is sent to the model; a zod (or any Standard
 * Schema) input is also validated before `execute` runs, a plain JSON Schema is not.
 */
export interface AgentTool<INPUT = unknown, OUTPUT = unknown> {
  /** What the model calls it: letters, digits, `_` and `-`, at most 64. */
  name: string;
  description?: string;
  inputSchema: FlexibleSchema<INPUT> | JSONSchema7;
  /** Its value (JSON-serializable) is recorded as the `tool/result`; a throw records a failed one. */
  execute(input: INPUT, context: ToolRunContext): OUTPUT | Promise<OUTPUT>;
  /**
   * How long a call may run: past it its signal is aborted and a failed `tool/result`
   * (`tool_timeout: …`) recorded, and the turn goes on. @default the agent's `limits.toolTimeoutMs`
   */
  timeoutMs?: number;
  /**
   * Asks the operator first, through the session's interactions: the turn parks until someone
   * answers `session.respond`; a denied call is recorded as a failed `tool/result`.
   */
  needsApproval?: boolean | { bivariance(input: INPUT): boolean | Promise<boolean> }["bivariance"];
  /** The approval's `action` text. @default the tool's name and its JSON input */
  describe?: { bivariance(input: INPUT): string }["bivariance"];
}

/** Types a tool from its schema (or its `execute`) and erases that type for a driver's list. */
export function defineTool<INPUT, OUTPUT>(definition: AgentTool<INPUT, OUTPUT>): AgentTool {
  return definition as AgentTool;
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Checks the names once, when a driver is built: a bad one would fail every turn at the endpoint. */
export function toolsByName(tools: readonly AgentTool[]): ReadonlyMap<string, AgentTool> {
  const byName = new Map<string, AgentTool>();
  for (const t of tools) {
    if (!TOOL_NAME.test(t.name))
      throw new TypeError(`tool name ${JSON.stringify(t.name)} is not [A-Za-z0-9_-]{1,64}`);
    if (byName.has(t.name)) throw new TypeError(`two tools are named ${t.name}`);
    const wrong = t.timeoutMs === undefined ? null : waitRule(t.timeoutMs);
    if (wrong !== null)
      throw new TypeError(
        `tool ${t.name}: timeoutMs must be ${wrong}, got ${describeOptionValue(t.timeoutMs)}`,
      );
    byName.set(t.name, t);
  }
  return byName;
}

/**
 * The tools as the AI SDK declares them to the model, without `execute`: the driver runs the
 * calls itself, so approvals, limits and the log stay in its hands.
 */
export function declaredTools(tools: ReadonlyMap<string, AgentTool>): ToolSet {
  const set: ToolSet = {};
  for (const [name, t] of tools) {
    set[name] = tool({
      ...(t.description !== undefined ? { description: t.description } : {}),
      inputSchema: asFlexibleSchema(t.inputSchema),
    });
  }
  return set;
}

/** A plain JSON Schema object is wrapped; zod, Standard Schema and `jsonSchema()` pass as they are. */
function asFlexibleSchema(schema: FlexibleSchema<unknown> | JSONSchema7): FlexibleSchema<unknown> {
  if (typeof schema === "function" || "~standard" in schema || "validate" in schema) {
    return schema as FlexibleSchema<unknown>;
  }
  return jsonSchema(schema as JSONSchema7);
}
