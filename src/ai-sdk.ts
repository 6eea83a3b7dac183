/**
 * `sessionmux/ai-sdk`: agents on the Vercel AI SDK, apart from the package root so an app that
 * brings its own agent neither loads the SDK nor type-checks its declarations.
 */
export {
  type AgentLimitCode,
  AgentLimitError,
  type AgentLimits,
  DEFAULT_AGENT_LIMITS,
} from "./agents/agent-limits.js";
export { type AgentTool, defineTool, type ToolRunContext } from "./agents/agent-tool.js";
export { AiSdkAgent, type AiSdkAgentOptions } from "./agents/ai-sdk-agent.js";
export { OpenAIAgent, type OpenAIAgentOptions } from "./agents/openai-agent.js";
