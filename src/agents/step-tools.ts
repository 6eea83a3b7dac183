import type { JSONValue } from "ai";
import type { Resolution } from "../../protocol/index.js";
import { cutUtf16 } from "../../protocol/utf16-cut.js";
import { longTimeout } from "../client/long-timeout.js";
import type { TurnContext } from "./agent.js";
import type { AgentTool } from "./agent-tool.js";
import {
  type ModelToolCall,
  recordedResult,
  type ToolOutcome,
  type TurnTranscript,
} from "./turn-transcript.js";

/** How long an approval's `action` text may be; the input beyond it is cut. */
const MAX_ACTION_CHARS = 300;

/** Answers already given to approvals, by tool call id (a parked turn continued after a restart). */
export type ApprovalAnswers = ReadonlyMap<string, Resolution>;

export interface StepToolOptions {
  /** How long a call may run when its tool sets no `timeoutMs` (`AgentLimits.toolTimeoutMs`). */
  toolTimeoutMs: number;
  answers?: ApprovalAnswers;
}

/**
 * Runs one step's tool calls. Approvals are asked first, all at once, so a turn that parks has run
 * none of the step's tools and a continuation after a restart runs each exactly once; then every
 * allowed call runs in parallel and its `tool/result` is recorded as it finishes. Results go to
 * the transcript in call order, as the model expects them.
 */
export async function runStepTools(
  turn: TurnContext,
  tools: ReadonlyMap<string, AgentTool>,
  calls: readonly ModelToolCall[],
  transcript: TurnTranscript,
  options: StepToolOptions,
): Promise<void> {
  const answers = options.answers ?? new Map<string, Resolution>();
  const allowed = await Promise.all(calls.map((call) => approve(turn, tools, call, answers)));
  const outcomes = await Promise.all(
    calls.map(async (call, i): Promise<ToolOutcome> => {
      const refusal = allowed[i];
      const started = Date.now();
      const outcome =
        refusal ?? (await execute(turn, tools.get(call.toolName)!, call, options.toolTimeoutMs));
      await turn.emit({
        type: "tool/result",
        toolCallId: call.toolCallId,
        ...recordedResult(outcome),
        durationMs: refusal ? 0 : Math.max(0, Date.now() - started),
      });
      return outcome;
    }),
  );
  calls.forEach((call, i) => {
    transcript.addResult(call.toolCallId, outcomes[i]!);
  });
}

/** `undefined` when the call may run, else the outcome it is recorded with instead. */
async function approve(
  turn: TurnContext,
  tools: ReadonlyMap<string, AgentTool>,
  call: ModelToolCall,
  answers: ApprovalAnswers,
): Promise<ToolOutcome | undefined> {
  if (call.invalid !== undefined) return { kind: "error", message: call.invalid };
  const tool = tools.get(call.toolName);
  if (!tool) return { kind: "error", message: `no tool named ${call.toolName}` };
  let needed: boolean;
  try {
    needed =
      typeof tool.needsApproval === "function"
        ? await tool.needsApproval(call.input)
        : tool.needsApproval === true;
  } catch (err) {
    return { kind: "error", message: `approval rule failed: ${messageOf(err)}` };
  }
  if (!needed) return undefined;
  const resolution =
    answers.get(call.toolCallId) ??
    (await turn.requestInteraction({
      kind: "approval",
      action: actionOf(tool, call),
      toolCallId: call.toolCallId,
    }));
  if ("outcome" in resolution && resolution.outcome === "approve") return undefined;
  return { kind: "denied", reason: "the operator denied this call" };
}

/**
 * Runs one call within its time: past it the call's signal is aborted and the turn goes on without
 * waiting for the call to return (a tool that ignores its signal cannot hold the turn), the model
 * told that it timed out.
 */
async function execute(
  turn: TurnContext,
  tool: AgentTool,
  call: ModelToolCall,
  defaultTimeoutMs: number,
): Promise<ToolOutcome> {
  const timeoutMs = tool.timeoutMs ?? defaultTimeoutMs;
  const expired = new AbortController();
  let clearTimer = (): void => {};
  const timedOut = new Promise<never>((_, reject) => {
    clearTimer = longTimeout(() => {
      const error = new Error(`tool_timeout: ${call.toolName} gave no result within ${timeoutMs} ms`);
      expired.abort(error);
      reject(error);
    }, timeoutMs);
  });
  try {
    const running = (async () =>
      tool.execute(call.input, {
        sessionId: turn.sessionId,
        turnId: turn.turnId,
        toolCallId: call.toolCallId,
        signal: AbortSignal.any([turn.signal, expired.signal]),
      }))();
    const value = await Promise.race([running, timedOut]);
    return { kind: "ok", value: jsonValue(value) };
  } catch (err) {
    // a cancelled turn ends cancelled, not with a tool failure the model would be told about
    turn.signal.throwIfAborted();
    return { kind: "error", message: messageOf(err) };
  } finally {
    clearTimer();
  }
}

function actionOf(tool: AgentTool, call: ModelToolCall): string {
  let text: string;
  try {
    text = tool.describe ? tool.describe(call.input) : `${call.toolName} ${JSON.stringify(call.input)}`;
  } catch {
    text = call.toolName;
  }
  return text.length <= MAX_ACTION_CHARS ? text : `${cutUtf16(text, MAX_ACTION_CHARS - 1)}…`;
}

/** What the log holds and the model reads: JSON only; `undefined` becomes null, a cycle a failure. */
function jsonValue(value: unknown): JSONValue {
  const text = JSON.stringify(value ?? null);
  return JSON.parse(text) as JSONValue;
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message || err.name : String(err);
}
