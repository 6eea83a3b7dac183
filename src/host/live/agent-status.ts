import type { LiveAgentState } from "./live-state.js";

/** Agent status of live sessions; leaving the map is the `detached` transition. */
export class AgentStatusBoard {
  readonly #states = new Map<string, LiveAgentState>();
  readonly #onChange: (sessionId: string, state: LiveAgentState | "detached") => void;

  constructor(onChange: (sessionId: string, state: LiveAgentState | "detached") => void) {
    this.#onChange = onChange;
  }

  set(sessionId: string, state: LiveAgentState): void {
    if (this.#states.get(sessionId) === state) return;
    this.#states.set(sessionId, state);
    this.#onChange(sessionId, state);
  }

  remove(sessionId: string): void {
    if (!this.#states.delete(sessionId)) return;
    this.#onChange(sessionId, "detached");
  }

  get(sessionId: string): LiveAgentState | undefined {
    return this.#states.get(sessionId);
  }

  all(): { sessionId: string; state: LiveAgentState }[] {
    return [...this.#states].map(([sessionId, state]) => ({ sessionId, state }));
  }
}
