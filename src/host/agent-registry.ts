import type { Logger } from "pino";
import { SessionmuxError } from "../../protocol/index.js";
import type { HostMeters } from "./host-meters.js";
import type { LiveRegistry } from "./live/live-registry.js";
import { LiveSession, RunningTurn } from "./live-session.js";

/**
 * Which sessions have a live agent. Attaching is synchronous get-or-create, so two prompts racing
 * to resume one cold session always share one agent. Idle agents detach after `idleDetachMs`.
 */
export class AgentRegistry {
  readonly #sessions = new Map<string, LiveSession>();
  /** Live sessions per owner, least recently asked for work first. */
  readonly #byOwner = new Map<string, Set<LiveSession>>();
  readonly #maxPerOwner: number;
  readonly #live: LiveRegistry;
  readonly #idleDetachMs: number;
  readonly #metrics: HostMeters | undefined;
  readonly #logger: Logger;
  readonly #onDetached: ((sessionId: string) => void) | undefined;
  #closed = false;

  constructor(options: {
    live: LiveRegistry;
    idleDetachMs: number;
    maxLiveAgentsPerOwner: number;
    metrics?: HostMeters;
    logger: Logger;
    /** After a session's agent detached (its lease, if any, may go). */
    onDetached?: (sessionId: string) => void;
  }) {
    this.#live = options.live;
    this.#maxPerOwner = options.maxLiveAgentsPerOwner;
    this.#idleDetachMs = options.idleDetachMs;
    this.#metrics = options.metrics;
    this.#logger = options.logger;
    this.#onDetached = options.onDetached;
  }

  get(sessionId: string): LiveSession | undefined {
    return this.#sessions.get(sessionId);
  }

  all(): LiveSession[] {
    return [...this.#sessions.values()];
  }

  /** Whether a turn a previous process left waiting on a person holds the session (no agent runs it). */
  hasParkedTurn(sessionId: string): boolean {
    return this.#live.interactionRegistry.parkedTurn(sessionId) !== undefined;
  }

  /** Returns the live session, attaching an agent if there is none; either way its idle clock restarts. */
  attach(sessionId: string, info: { owner: string; model: string }): LiveSession {
    if (this.#closed)
      throw new SessionmuxError("host_shutting_down", "the host is shutting down; reconnect shortly");
    const existing = this.#sessions.get(sessionId);
    if (existing) {
      if (!existing.turn) this.#scheduleIdle(existing);
      this.#touch(existing);
      return existing;
    }
    this.#makeRoom(sessionId, info.owner);
    const session = new LiveSession(sessionId, info.owner, info.model);
    // a turn a previous process left waiting on a person keeps the session busy: prompts queue
    const parked = this.#live.interactionRegistry.parkedTurn(sessionId);
    if (parked !== undefined) {
      session.turn = new RunningTurn(parked);
      session.turn.parked = true;
    }
    this.#sessions.set(sessionId, session);
    this.#touch(session);
    this.#live.attach(sessionId, info.owner);
    this.#metrics?.agentsLive(this.#sessions.size);
    this.#logger.debug({ sessionId }, "agent attached");
    this.#scheduleIdle(session);
    return session;
  }

  /** The agent has nothing to do: report `idle` and start the idle clock. */
  markIdle(session: LiveSession): void {
    if (session.detached || this.#closed) return;
    this.#live.status.set(session.sessionId, "idle");
    this.#scheduleIdle(session);
  }

  markRunning(session: LiveSession): void {
    this.#cancelIdle(session);
    this.#live.status.set(session.sessionId, "running");
  }

  /** Drops the live session and its process-local state. The caller stops its turn first. */
  detach(sessionId: string, jobsEnd: "cancelled" | "interrupted" = "cancelled"): void {
    const session = this.#sessions.get(sessionId);
    if (!session) return;
    session.detached = true;
    this.#cancelIdle(session);
    this.#sessions.delete(sessionId);
    const owned = this.#byOwner.get(session.owner);
    owned?.delete(session);
    if (owned?.size === 0) this.#byOwner.delete(session.owner);
    this.#live.detach(sessionId, jobsEnd);
    this.#metrics?.agentsLive(this.#sessions.size);
    this.#logger.debug({ sessionId }, "agent detached");
    this.#onDetached?.(sessionId);
  }

  /**
   * Detaches an agent that has nothing to do: no turn running (a turn a previous process left
   * parked stays parked in the store, as before the agent attached), no prompt being queued, no
   * job running. The caller knows no call is about to give it work.
   */
  detachUnused(session: LiveSession): void {
    if (session.detached || this.#sessions.get(session.sessionId) !== session) return;
    if (session.turn && !session.turn.parked) return;
    if (session.pendingEnqueues > 0 || this.#live.jobRegistry.hasRunning(session.sessionId)) return;
    this.detach(session.sessionId);
  }

  /** Refuses new agents and stops every idle clock (shutdown leaves no timers behind). */
  close(): void {
    this.#closed = true;
    for (const session of this.#sessions.values()) this.#cancelIdle(session);
  }

  /**
   * Keeps an owner under its live-agent limit: idle agents (no turn, no prompt queued, no running
   * job, no call under way that resolved it) are detached, least recently used first; with none idle the new agent is refused. Nothing
   * durable is lost: a refused prompt was not accepted, and queues and interactions stay in the store.
   */
  #makeRoom(sessionId: string, owner: string): void {
    const owned = this.#byOwner.get(owner);
    if (!owned || owned.size < this.#maxPerOwner) return;
    for (const candidate of [...owned]) {
      if (owned.size < this.#maxPerOwner) return;
      // a queued prompt waiting for attachment room is work: detached, nothing would start it
      // when room came back, as its wake finds the session gone and its queue stays in the store;
      // so is a call that resolved the session and has yet to give it its work (a prompt's turn):
      // detached, that turn ran on an agent nobody could cancel, beside a second one a prompt began
      if (
        !candidate.turn &&
        candidate.calls === 0 &&
        candidate.pendingEnqueues === 0 &&
        this.#live.promptQueue.size(candidate.sessionId) === 0 &&
        !this.#live.jobRegistry.hasRunning(candidate.sessionId)
      )
        this.detach(candidate.sessionId);
    }
    if (owned.size >= this.#maxPerOwner) {
      throw new SessionmuxError(
        "too_many_agents",
        `${owner} already has ${this.#maxPerOwner} agents at work; wait for a turn to finish or cancel one`,
        { data: { sessionId, max: this.#maxPerOwner } },
      );
    }
  }

  #touch(session: LiveSession): void {
    let owned = this.#byOwner.get(session.owner);
    if (!owned) {
      owned = new Set();
      this.#byOwner.set(session.owner, owned);
    }
    owned.delete(session);
    owned.add(session);
  }

  #scheduleIdle(session: LiveSession): void {
    this.#cancelIdle(session);
    if (this.#closed) return;
    const timer = setTimeout(() => this.#idleElapsed(session), this.#idleDetachMs);
    timer.unref();
    session.idleTimer = timer;
  }

  #idleElapsed(session: LiveSession): void {
    session.idleTimer = undefined;
    if (session.detached || this.#sessions.get(session.sessionId) !== session) return;
    // a running turn or background job is work: look again after another idle period; so is a
    // queued prompt, whose start waits for attachment room or a retry: detached, nothing would start it
    if (
      session.turn ||
      session.pendingEnqueues > 0 ||
      this.#live.promptQueue.size(session.sessionId) > 0 ||
      this.#live.jobRegistry.hasRunning(session.sessionId)
    ) {
      this.#scheduleIdle(session);
      return;
    }
    this.detach(session.sessionId);
  }

  #cancelIdle(session: LiveSession): void {
    if (session.idleTimer) clearTimeout(session.idleTimer);
    session.idleTimer = undefined;
  }
}
