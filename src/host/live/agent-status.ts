import type { LiveAgentState } from "./live-state.js";

interface Entry {
  state: LiveAgentState;
  /** The host running the agent (hosts sharing a store); undefined on a single host. */
  hostId: string | undefined;
}

/** Agent status of live sessions (this host's and, on a shared store, other hosts'); leaving the map is `detached`. */
export class AgentStatusBoard {
  readonly #states = new Map<string, Entry>();
  readonly #onChange: (sessionId: string, state: LiveAgentState | "detached", hostId?: string) => void;

  constructor(onChange: (sessionId: string, state: LiveAgentState | "detached", hostId?: string) => void) {
    this.#onChange = onChange;
  }

  set(sessionId: string, state: LiveAgentState, hostId?: string): void {
    const entry = this.#states.get(sessionId);
    const host = hostId ?? entry?.hostId;
    if (entry?.state === state && entry.hostId === host) return;
    this.#states.set(sessionId, { state, hostId: host });
    this.#onChange(sessionId, state, host);
  }

  remove(sessionId: string): void {
    if (!this.#states.delete(sessionId)) return;
    this.#onChange(sessionId, "detached");
  }

  get(sessionId: string): LiveAgentState | undefined {
    return this.#states.get(sessionId)?.state;
  }

  hostOf(sessionId: string): string | undefined {
    return this.#states.get(sessionId)?.hostId;
  }

  all(): { sessionId: string; state: LiveAgentState; hostId?: string }[] {
    return [...this.#states].map(([sessionId, { state, hostId }]) =>
      hostId === undefined ? { sessionId, state } : { sessionId, state, hostId },
    );
  }
}
