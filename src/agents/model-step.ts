import { type LanguageModel, streamText, type TextStreamPart, type ToolSet } from "ai";
import { longTimeout } from "../client/long-timeout.js";
import type { TurnContext } from "./agent.js";
import { AgentLimitError, type AgentLimits } from "./agent-limits.js";
import { messageOf } from "./step-tools.js";
import type { ModelToolCall, TurnTranscript } from "./turn-transcript.js";

type StreamPart = TextStreamPart<ToolSet>;

export interface StepOptions {
  model: LanguageModel;
  system?: string;
  tools: ToolSet;
  limits: AgentLimits;
  maxRetries: number;
}

/**
 * One model call: text and reasoning are recorded as deltas while they stream, each tool call as
 * a `tool/call` once its input is complete. Returns the calls the model asked for (none: it is
 * done). A provider failure, a broken stream or a limit passed throws; nothing is retried here
 * beyond the SDK's own retries of a call that has not started streaming.
 */
export async function streamStep(
  turn: TurnContext,
  transcript: TurnTranscript,
  options: StepOptions,
): Promise<ModelToolCall[]> {
  const { limits } = options;
  // the wait for the model's next part; time spent recording a part is not the model's
  const quiet = new AbortController();
  const stalled = new AgentLimitError(
    "model_stalled",
    limits.modelIdleMs,
    `the model sent nothing for ${limits.modelIdleMs} ms`,
  );
  const arm = () => longTimeout(() => quiet.abort(stalled), limits.modelIdleMs);
  let clearIdle = arm();
  const result = streamText({
    model: options.model,
    ...(options.system !== undefined ? { system: options.system } : {}),
    messages: transcript.messages(),
    tools: options.tools,
    maxRetries: options.maxRetries,
    abortSignal: AbortSignal.any([turn.signal, quiet.signal]),
    // failures arrive as `error` parts below, with their cause; the SDK's default prints them
    onError: () => {},
  });
  const calls: ModelToolCall[] = [];
  const callIds = new Set<string>();
  let chars = 0;
  const count = (text: string) => {
    chars += text.length;
    if (chars > limits.maxStepChars) {
      throw new AgentLimitError(
        "step_too_long",
        limits.maxStepChars,
        `the model streamed more than ${limits.maxStepChars} characters in one step`,
      );
    }
  };
  const countCall = (id: string) => {
    callIds.add(id);
    if (callIds.size > limits.maxToolCallsPerStep) {
      throw new AgentLimitError(
        "too_many_tool_calls",
        limits.maxToolCallsPerStep,
        `the model asked for more than ${limits.maxToolCallsPerStep} tool calls in one step`,
      );
    }
  };
  try {
    for await (const part of result.fullStream) {
      clearIdle();
      await recordPart(part);
      clearIdle = arm();
    }
  } catch (err) {
    // a cancel wins over a stall that fired at the same time
    throw quiet.signal.aborted && !turn.signal.aborted ? stalled : err;
  } finally {
    clearIdle();
  }
  return calls;

  async function recordPart(part: StreamPart): Promise<void> {
    switch (part.type) {
      case "text-delta":
        if (!part.text) break;
        count(part.text);
        transcript.addText(part.text);
        await turn.emit({ type: "assistant/delta", text: part.text });
        break;
      case "reasoning-delta":
        if (!part.text) break;
        count(part.text);
        await turn.emit({ type: "reasoning/delta", text: part.text });
        break;
      case "tool-input-start":
        countCall(part.id);
        break;
      case "tool-input-delta":
        count(part.delta);
        break;
      case "tool-call": {
        countCall(part.toolCallId);
        const call: ModelToolCall = {
          toolCallId: part.toolCallId,
          toolName: part.toolName,
          input: part.input,
        };
        if (part.invalid) call.invalid = `invalid call of ${part.toolName}: ${messageOf(part.error)}`;
        transcript.addCall(call);
        calls.push(call);
        await turn.emit({
          type: "tool/call",
          toolCallId: call.toolCallId,
          name: call.toolName,
          args: call.input,
        });
        break;
      }
      case "error":
        throw part.error;
      case "abort":
        throw turn.signal.reason ?? new Error("the model call was aborted");
    }
  }
}
