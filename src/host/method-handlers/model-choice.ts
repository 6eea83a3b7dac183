import { SessionmuxError } from "../../../protocol/index.js";
import type { AgentDriver } from "../../agents/agent.js";

/** A model must be one the agent offers (`session.models`). */
export function chooseModel(agent: AgentDriver, model: string | undefined): string {
  if (model === undefined) return agent.defaultModel;
  if (agent.models().some((m) => m.id === model)) return model;
  throw new SessionmuxError("bad_request", `unknown model ${model}; see session.models`, {
    data: { field: "/model" },
  });
}
