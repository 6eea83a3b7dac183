import type { LiveAgentState } from "../../protocol/index.js";
import type { SessionActivity } from "./session-activity.js";

/**
 * Why Steer is not offered for a session's queued prompts, or undefined when it is. The host takes
 * a steer only into a turn a live agent runs, which its status says `running` (waiting on a person
 * included). A turn parked since its host stopped waits on an answer with no agent running it (the
 * session cold, or its agent only attached): the host refuses that steer with `agent_not_live`.
 */
export function steerBlocked(
  activity: SessionActivity,
  agent: LiveAgentState | undefined,
): string | undefined {
  if (agent === "running") return undefined;
  return activity === "waiting"
    ? "No agent runs this turn until you answer what it waits on (its host stopped since it asked); steer once it runs again"
    : "No turn is running to take it; it starts next";
}
