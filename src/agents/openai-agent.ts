import type { Resolution } from "../../protocol/index.js";
import type { AgentDriver, ParkedAnswer, TurnContext, TurnOutcome } from "./agent.js";
import { type ChatMessage, chatHistory, turnSoFar } from "./chat-history.js";
import { sseData } from "./sse-data.js";

export interface OpenAIAgentOptions {
  /** e.g. `https://api.openai.com/v1`; requests go to `{baseURL}/chat/completions`. */
  baseURL: string;
  model: string;
  apiKey?: string;
}

interface StreamChunk {
  choices?: {
    delta?: {
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: { index?: number; id?: string; function?: { name?: string; arguments?: string } }[];
    };
  }[];
}

interface PartialToolCall {
  id: string;
  name: string;
  args: string;
}

/** Any OpenAI-compatible streaming chat endpoint: text → deltas, reasoning → reasoning deltas, tool calls → events. */
export class OpenAIAgent implements AgentDriver {
  readonly name = "openai";
  readonly defaultModel: string;
  readonly #options: OpenAIAgentOptions;

  constructor(options: OpenAIAgentOptions) {
    this.#options = { ...options, baseURL: options.baseURL.replace(/\/+$/, "") };
    this.defaultModel = options.model;
  }

  /** Reads `SESSIONMUX_OPENAI_BASE_URL`, `_MODEL`, `_API_KEY`, falling back to `OPENAI_*`. */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): OpenAIAgent {
    const apiKey = env.SESSIONMUX_OPENAI_API_KEY ?? env.OPENAI_API_KEY;
    return new OpenAIAgent({
      baseURL: env.SESSIONMUX_OPENAI_BASE_URL ?? env.OPENAI_BASE_URL ?? "https://api.openai.com/v1",
      model: env.SESSIONMUX_OPENAI_MODEL ?? env.OPENAI_MODEL ?? "gpt-4o-mini",
      ...(apiKey ? { apiKey } : {}),
    });
  }

  models(): { id: string; label: string }[] {
    return [{ id: this.#options.model, label: this.#options.model }];
  }

  async runTurn(turn: TurnContext): Promise<TurnOutcome> {
    return this.#guarded(turn, async () => [
      ...chatHistory(await turn.history(), turn.turnId),
      { role: "user", content: turn.prompt.text },
    ]);
  }

  /**
   * A turn parked on interactions when its host stopped: the conversation continues from the log
   * (earlier turns, then this turn so far) with the answers given as the operator's next message.
   */
  async continueTurn(turn: TurnContext, answers: ParkedAnswer[]): Promise<TurnOutcome> {
    return this.#guarded(turn, async () => {
      const history = await turn.history();
      return [
        ...chatHistory(history, turn.turnId),
        ...turnSoFar(history, turn.turnId),
        { role: "user", content: answers.map(describeAnswer).join("\n") },
      ];
    });
  }

  async #guarded(turn: TurnContext, messages: () => Promise<ChatMessage[]>): Promise<TurnOutcome> {
    try {
      return await this.#stream(turn, await messages());
    } catch (err) {
      if (turn.signal.aborted) return { state: "cancelled" };
      return {
        state: "failed",
        error: `chat completion failed: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
  }

  async #stream(turn: TurnContext, messages: ChatMessage[]): Promise<TurnOutcome> {
    const url = `${this.#options.baseURL}/chat/completions`;
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "text/event-stream",
    };
    if (this.#options.apiKey) headers.authorization = `Bearer ${this.#options.apiKey}`;
    const response = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: this.#modelFor(turn), messages, stream: true }),
      signal: turn.signal,
    });
    if (!response.ok || !response.body) {
      const detail = (await response.text().catch(() => "")).slice(0, 500);
      return { state: "failed", error: `HTTP ${response.status} from ${url}${detail ? `: ${detail}` : ""}` };
    }
    const toolCalls = new Map<number, PartialToolCall>();
    for await (const data of sseData(response.body)) {
      const chunk = parseChunk(data);
      const delta = chunk?.choices?.[0]?.delta;
      if (!delta) continue;
      if (delta.reasoning_content)
        await turn.emit({ type: "reasoning/delta", text: delta.reasoning_content });
      if (delta.content) await turn.emit({ type: "assistant/delta", text: delta.content });
      for (const call of delta.tool_calls ?? []) {
        const index = call.index ?? 0;
        const partial = toolCalls.get(index) ?? { id: "", name: "", args: "" };
        if (call.id) partial.id = call.id;
        if (call.function?.name) partial.name += call.function.name;
        if (call.function?.arguments) partial.args += call.function.arguments;
        toolCalls.set(index, partial);
      }
    }
    for (const [index, call] of [...toolCalls].sort(([a], [b]) => a - b)) {
      await turn.emit({
        type: "tool/call",
        toolCallId: call.id || `${turn.turnId}-tool-${index}`,
        name: call.name,
        args: parseArgs(call.args),
      });
    }
    return { state: "completed" };
  }

  #modelFor(turn: TurnContext): string {
    return turn.model === this.#options.model ? turn.model : this.defaultModel;
  }
}

/** An answer as the operator's words, naming what it answers (and the tool call, when one). */
function describeAnswer({ interaction, resolution }: ParkedAnswer): string {
  const tool = interaction.toolCallId ? ` (tool call ${interaction.toolCallId})` : "";
  const subject =
    interaction.kind === "approval"
      ? `Approval of "${interaction.action ?? ""}"${tool}`
      : `Answer to "${interaction.question ?? ""}"${tool}`;
  return `${subject}: ${answerText(resolution)}`;
}

function answerText(resolution: Resolution): string {
  if ("outcome" in resolution) return resolution.outcome === "approve" ? "approved" : "denied";
  return resolution.answer;
}

function parseChunk(data: string): StreamChunk | undefined {
  try {
    return JSON.parse(data) as StreamChunk;
  } catch {
    return undefined;
  }
}

/** Tool arguments arrive as JSON text; a model that sends broken JSON still gets its text recorded. */
function parseArgs(text: string): unknown {
  if (text === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
