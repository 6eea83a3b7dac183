import type {
  ControlItem,
  Interaction,
  Job,
  LiveAgentState,
  QueueItem,
  Resolution,
} from "../../../protocol/index.js";

/** Agent status as control reports it; `detached` is only ever a delta. */
export type { LiveAgentState };

export type Baseline = Extract<ControlItem, { kind: "baseline" }>;
export type ControlDelta = Exclude<ControlItem, { kind: "baseline" }>;

/**
 * Process-local live state (protocol-v1 §1): queues, interactions, jobs, agent status.
 * Behind an interface so a second host (or a shared store) can implement it.
 * Listeners are called synchronously after each change, in change order.
 */
export interface LiveState {
  agents(): { sessionId: string; state: LiveAgentState }[];
  queue(sessionId: string): QueueItem[];
  queues(): { sessionId: string; items: QueueItem[] }[];
  jobs(sessionId: string): Job[];
  allJobs(): { sessionId: string; jobs: Job[] }[];
  interactions(): Interaction[];
  interaction(interactionId: string): Interaction | undefined;
  /** The winning resolution of an interaction resolved recently (for idempotent repeats). */
  resolution(interactionId: string): Resolution | undefined;
  isLive(sessionId: string): boolean;
  isRunning(sessionId: string): boolean;
  /** Every change as a control delta (projection deltas excluded: those come from the store). */
  subscribe(listener: (delta: ControlDelta) => void): () => void;
}
