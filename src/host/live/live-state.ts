import type { ControlItem, Interaction, Job, LiveAgentState, QueueItem } from "../../../protocol/index.js";

/** Agent status as control reports it; `detached` is only ever a delta. */
export type { LiveAgentState };

export type Baseline = Extract<ControlItem, { kind: "baseline" }>;
export type ControlDelta = Exclude<ControlItem, { kind: "baseline" }>;

/**
 * Live state (protocol-v1 §1): queues and interactions (cached from the durable store), jobs and
 * agent status (process-local).
 * Listeners are called synchronously after each change, in change order.
 */
export interface LiveState {
  /** `hostId`: on a store several hosts share, the host the agent runs on. */
  agents(): { sessionId: string; state: LiveAgentState; hostId?: string }[];
  queue(sessionId: string): QueueItem[];
  jobs(sessionId: string): Job[];
  allJobs(): { sessionId: string; jobs: Job[] }[];
  interactions(): Interaction[];
  isLive(sessionId: string): boolean;
  isRunning(sessionId: string): boolean;
  /** Every change as a control delta (projection deltas excluded: those come from the store). */
  subscribe(listener: (delta: ControlDelta) => void): () => void;
}
