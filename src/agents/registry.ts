import { StartupError } from "../operations/startup-error.js";
import type { AgentDriver } from "./agent.js";
import { missingOpenAIKey } from "./agent-option-checks.js";
import { DemoAgent } from "./demo-agent.js";
import { OpenAIAgent } from "./openai-agent.js";

export type AgentName = "demo" | "openai";
export const AGENT_NAMES: readonly AgentName[] = ["demo", "openai"];

/**
 * The CLI's `--agent`: `demo` needs nothing, `openai` reads its endpoint from `env`. OpenAI's own
 * endpoint without a key is refused before the host starts: every turn would fail with its 401.
 * Any other endpoint (a local server) may take none.
 */
export function createAgent(name: AgentName, env: NodeJS.ProcessEnv = process.env): AgentDriver {
  switch (name) {
    case "demo":
      return new DemoAgent();
    case "openai": {
      const endpoint = OpenAIAgent.endpointFromEnv(env);
      const { baseURL } = endpoint;
      if (missingOpenAIKey(baseURL, endpoint.apiKey)) {
        throw new StartupError(
          "agent_unconfigured",
          `--agent openai talks to ${baseURL}, which needs a key: set SESSIONMUX_OPENAI_API_KEY (or OPENAI_API_KEY), or SESSIONMUX_OPENAI_BASE_URL for an endpoint that takes none`,
        );
      }
      try {
        return new OpenAIAgent(endpoint);
      } catch (err) {
        // a base URL that is no http(s) URL: refused here rather than failing every turn
        throw new StartupError(
          "agent_unconfigured",
          `--agent openai: ${(err as Error).message} (set SESSIONMUX_OPENAI_BASE_URL or OPENAI_BASE_URL)`,
        );
      }
    }
  }
}
