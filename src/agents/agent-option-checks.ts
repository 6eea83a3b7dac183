import { describeOptionValue } from "../embed/option-value.js";

/**
 * The checks an AI SDK agent's options pass when it is built, each a `TypeError` naming the
 * option. A JavaScript caller (or one behind a cast) got `Cannot read properties of undefined
 * (reading 'replace')` for a misspelt `baseUrl`, and an agent built without `model` or with a
 * misspelt `tools` started and failed, or ran toolless, at the first turn.
 */

const AI_SDK_OPTIONS = [
  "name",
  "models",
  "languageModel",
  "tools",
  "system",
  "limits",
  "maxRetries",
  "logger",
];
const OPENAI_OPTIONS = ["baseURL", "model", "apiKey", "tools", "system", "limits", "maxRetries", "logger"];

/** `new AiSdkAgent(options)`: the names, the models and the function that makes a model. */
export function checkAiSdkAgentOptions(options: unknown): void {
  const given = optionsObject("AiSdkAgent", options, AI_SDK_OPTIONS);
  const models = given.models;
  if (Array.isArray(models) && models.length === 0) {
    throw new TypeError("an AI SDK agent needs at least one model");
  }
  if (!Array.isArray(models)) {
    throw new TypeError(
      `models must be an array of { id, label }, the first the default, got ${describeOptionValue(models)}`,
    );
  }
  models.forEach((model: unknown, index) => {
    const m = model as { id?: unknown; label?: unknown } | null;
    if (m === null || typeof m !== "object" || !nonEmptyString(m.id) || typeof m.label !== "string") {
      throw new TypeError(
        `models[${index}] must be { id: string, label: string }, got ${describeOptionValue(model)}`,
      );
    }
  });
  if (typeof given.languageModel !== "function") {
    throw new TypeError(
      `languageModel must be a function from a model id to an AI SDK model, e.g. (id) => anthropic(id), got ${describeOptionValue(given.languageModel)}`,
    );
  }
  if (given.name !== undefined && !nonEmptyString(given.name)) {
    throw new TypeError(`name must be a non-empty string, got ${describeOptionValue(given.name)}`);
  }
  checkShared(given);
}

/** `new OpenAIAgent(options)`: the endpoint and model besides what every AI SDK agent takes. */
export function checkOpenAIAgentOptions(options: unknown): void {
  const given = optionsObject("OpenAIAgent", options, OPENAI_OPTIONS);
  if (!nonEmptyString(given.baseURL) || !/^https?:\/\/[^/]/i.test(given.baseURL)) {
    throw new TypeError(
      `baseURL must be the endpoint's http(s) URL, e.g. https://api.openai.com/v1, got ${describeOptionValue(given.baseURL)}`,
    );
  }
  if (!nonEmptyString(given.model)) {
    throw new TypeError(
      `model must be the model's id, e.g. "gpt-4o-mini", got ${describeOptionValue(given.model)}`,
    );
  }
  if (given.apiKey !== undefined && typeof given.apiKey !== "string") {
    // the value is not quoted: it may be a key
    throw new TypeError(`apiKey must be a string, got a ${typeof given.apiKey}`);
  }
  // every turn would fail with its 401: refused where the agent is built, not at each turn
  if (missingOpenAIKey(given.baseURL, given.apiKey)) {
    throw new TypeError(
      `apiKey is needed by ${given.baseURL} (fromEnv reads SESSIONMUX_OPENAI_API_KEY or OPENAI_API_KEY); an endpoint that takes no key needs its own baseURL`,
    );
  }
  checkShared(given);
}

function checkShared(given: Record<string, unknown>): void {
  if (given.system !== undefined && typeof given.system !== "string") {
    throw new TypeError(`system must be a string, got ${describeOptionValue(given.system)}`);
  }
  const retries = given.maxRetries;
  if (retries !== undefined && !(Number.isSafeInteger(retries) && (retries as number) >= 0)) {
    throw new TypeError(`maxRetries must be a whole number from 0, got ${describeOptionValue(retries)}`);
  }
  const tools = given.tools;
  if (tools !== undefined) {
    if (!Array.isArray(tools)) {
      throw new TypeError(`tools must be an array of tools (defineTool), got ${describeOptionValue(tools)}`);
    }
    tools.forEach((tool: unknown, index) => {
      const t = tool as { name?: unknown; execute?: unknown; inputSchema?: unknown } | null;
      const schema = t?.inputSchema;
      if (
        t === null ||
        typeof t !== "object" ||
        typeof t.execute !== "function" ||
        schema === null ||
        (typeof schema !== "object" && typeof schema !== "function")
      ) {
        throw new TypeError(
          `tools[${index}] must be a tool { name, inputSchema, execute } (defineTool), got ${describeOptionValue(tool)}`,
        );
      }
    });
  }
  const logger = given.logger as Record<string, unknown> | undefined | null;
  if (
    logger !== undefined &&
    (logger === null || typeof logger !== "object" || typeof logger.error !== "function")
  ) {
    throw new TypeError(`logger must be a pino logger, got ${describeOptionValue(logger)}`);
  }
}

function optionsObject(agent: string, options: unknown, known: readonly string[]): Record<string, unknown> {
  if (options === null || typeof options !== "object") {
    throw new TypeError(`${agent} takes an options object, got ${describeOptionValue(options)}`);
  }
  const given = options as Record<string, unknown>;
  const unknown = Object.keys(given).filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    throw new TypeError(
      `${agent}: unknown option${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")}; it takes ${known.join(", ")}`,
    );
  }
  return given;
}

const nonEmptyString = (value: unknown): value is string => typeof value === "string" && value !== "";

/** OpenAI's own endpoint without a key: any other endpoint (a local server) may take none. */
export function missingOpenAIKey(baseURL: string, apiKey: unknown): boolean {
  if (apiKey) return false;
  try {
    return new URL(baseURL).hostname === "api.openai.com";
  } catch {
    return false;
  }
}
