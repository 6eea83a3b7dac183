import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { checkOpenAIAgentOptions } from "./agent-option-checks.js";
import { AiSdkAgent, type AiSdkAgentOptions } from "./ai-sdk-agent.js";

export interface OpenAIAgentOptions extends Omit<AiSdkAgentOptions, "models" | "languageModel" | "name"> {
  /** e.g. `https://api.openai.com/v1`; requests go to `{baseURL}/chat/completions`. */
  baseURL: string;
  model: string;
  apiKey?: string;
}

/**
 * Any OpenAI-compatible streaming chat endpoint (OpenAI, vLLM, Ollama, llama.cpp, LiteLLM, …)
 * through the AI SDK's `@ai-sdk/openai-compatible` provider: text and `reasoning_content` stream
 * as deltas, tools run in the AI SDK agent's loop.
 */
export class OpenAIAgent extends AiSdkAgent {
  constructor(options: OpenAIAgentOptions) {
    checkOpenAIAgentOptions(options);
    const { baseURL, model, apiKey, ...rest } = options;
    const provider = createOpenAICompatible({
      name: "openai",
      baseURL: baseURL.replace(/\/+$/, ""),
      ...(apiKey ? { apiKey } : {}),
    });
    super({
      ...rest,
      name: "openai",
      models: [{ id: model, label: model }],
      languageModel: (id) => provider.chatModel(id),
    });
  }

  /** Reads `SESSIONMUX_OPENAI_BASE_URL`, `_MODEL`, `_API_KEY`, falling back to `OPENAI_*`. */
  static fromEnv(
    env: NodeJS.ProcessEnv = process.env,
    options: Omit<OpenAIAgentOptions, "baseURL" | "model" | "apiKey"> = {},
  ): OpenAIAgent {
    return new OpenAIAgent({ ...options, ...OpenAIAgent.endpointFromEnv(env) });
  }

  /**
   * The endpoint `fromEnv` takes: base URL and model (OpenAI's own by default), and the key if any.
   * A variable set empty counts as unset, as a shell's `VAR=` leaves it.
   */
  static endpointFromEnv(env: NodeJS.ProcessEnv): Pick<OpenAIAgentOptions, "baseURL" | "model" | "apiKey"> {
    const apiKey = firstSet(env.SESSIONMUX_OPENAI_API_KEY, env.OPENAI_API_KEY);
    return {
      baseURL: firstSet(env.SESSIONMUX_OPENAI_BASE_URL, env.OPENAI_BASE_URL) ?? "https://api.openai.com/v1",
      model: firstSet(env.SESSIONMUX_OPENAI_MODEL, env.OPENAI_MODEL) ?? "gpt-4o-mini",
      ...(apiKey ? { apiKey } : {}),
    };
  }
}

const firstSet = (...values: (string | undefined)[]): string | undefined =>
  values.find((value) => value !== undefined && value !== "");
