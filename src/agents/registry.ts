import type { AgentDriver } from "./agent.js";
import { DemoAgent } from "./demo-agent.js";
import { OpenAIAgent } from "./openai-agent.js";

export type AgentName = "demo" | "openai";
export const AGENT_NAMES: readonly AgentName[] = ["demo", "openai"];

/** The CLI's `--agent`: `demo` needs nothing, `openai` reads its endpoint from the environment. */
export function createAgent(name: AgentName): AgentDriver {
  switch (name) {
    case "demo":
      return new DemoAgent();
    case "openai":
      return OpenAIAgent.fromEnv();
  }
}
