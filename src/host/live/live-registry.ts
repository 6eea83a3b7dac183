import type { Interaction, InteractionKind, Job, QueueItem, SessionEvent } from "../../../protocol/index.js";
import type { LiveStateNotice, SessionLiveState } from "../../store/live-state-store.js";
import { AgentStatusBoard } from "./agent-status.js";
import { InteractionRegistry } from "./interaction-registry.js";
import { type JobLimits, type JobRecorder, JobRegistry } from "./job-registry.js";
import type { ControlDelta, LiveAgentState, LiveState } from "./live-state.js";
import { PromptQueue } from "./prompt-queue.js";
import { RemoteAgents } from "./remote-agents.js";

/** A summary of the live state in view (see `LiveRegistry.counts`). */
export interface LiveCounts {
  queued: number;
  interactions: Record<InteractionKind, number>;
  runningJobs: number;
}

export type OwnedDeltaListener = (delta: ControlDelta, sessionId: string, owner: string) => void;

/**
 * The host's view of live state, with one listener list fed in change order. Queues and
 * interactions are caches of the store's durable rows, changed only by its live-state notices
 * (`apply`); agent status and jobs are process-local. It remembers each live session's owner so
 * process-local deltas can be filtered per principal too.
 */
export class LiveRegistry implements LiveState {
  readonly #listeners = new Set<OwnedDeltaListener>();
  readonly #owners = new Map<string, string>();
  readonly promptQueue = new PromptQueue((sessionId, owner, items) =>
    this.#emit({ kind: "queue", sessionId, items }, sessionId, owner),
  );
  readonly interactionRegistry = new InteractionRegistry({
    requested: (interaction, owner) =>
      this.#emit({ kind: "interaction.requested", interaction }, interaction.sessionId, owner),
    resolved: (sessionId, owner, interactionId, resolution) =>
      this.#emit({ kind: "interaction.resolved", interactionId, resolution }, sessionId, owner),
    withdrawn: (sessionId, owner, interactionId) =>
      this.#emit({ kind: "interaction.withdrawn", interactionId }, sessionId, owner),
  });
  readonly jobRegistry: JobRegistry;
  readonly status = new AgentStatusBoard((sessionId, state, hostId) => {
    this.#emitLocal({
      kind: "agent",
      sessionId,
      state,
      ...(hostId !== undefined && state !== "detached" ? { hostId } : {}),
    });
    if (state === "detached") this.#owners.delete(sessionId);
  });
  /** Other hosts' agents (a shared store only). */
  readonly remote = new RemoteAgents(this.status, (sessionId, jobs) =>
    this.#emitLocal({ kind: "jobs", sessionId, jobs }),
  );
  /** This host's id when it shares the store with others: agent status then names hosts. */
  readonly #hostId: string | undefined;

  constructor(jobs: JobRecorder, hostId?: string, jobLimits: Partial<JobLimits> = {}) {
    this.#hostId = hostId;
    this.jobRegistry = new JobRegistry(
      (sessionId, list) => this.#emitLocal({ kind: "jobs", sessionId, jobs: list }),
      jobs,
      jobLimits,
    );
  }

  /** Adds sessions read from the store to the durable caches (at start, page by page). */
  load(sessions: readonly SessionLiveState[]): void {
    for (const s of sessions) {
      this.promptQueue.load(s.sessionId, s.queue);
      for (const interaction of s.interactions) this.interactionRegistry.load(interaction, s.owner);
      if (s.lease && this.#hostId !== undefined && s.lease.hostId !== this.#hostId) {
        this.#owners.set(s.sessionId, s.owner);
        this.remote.attach(s.sessionId, s.lease.hostId, s.jobs);
      }
    }
  }

  /** An agent another host runs (read from its lease at start). */
  loadRemote(sessionId: string, owner: string, hostId: string): void {
    if (hostId === this.#hostId || this.#owners.has(sessionId)) return;
    this.#owners.set(sessionId, owner);
    this.remote.attach(sessionId, hostId);
  }

  /** The host each agent in view of other hosts is shown on. */
  remoteHosts(): Map<string, string | undefined> {
    return new Map(this.remote.sessions().map((sessionId) => [sessionId, this.status.hostOf(sessionId)]));
  }

  /**
   * A session's lease as a sweep read it (`hostId` null: nobody holds it), for an agent shown on
   * `shownOn` when the sweep began: the view follows the lease, unless a notice moved it since.
   */
  remoteLeaseRead(sessionId: string, shownOn: string | undefined, hostId: string | null): void {
    if (!this.remote.has(sessionId) || this.status.hostOf(sessionId) !== shownOn) return;
    this.#leaseMoved(sessionId, this.#owners.get(sessionId) ?? "", hostId);
  }

  /** Commits of sessions whose agent another host runs move their status and jobs. */
  committed(sessionId: string, events: readonly SessionEvent[]): void {
    this.remote.committed(sessionId, events);
  }

  /** A committed live-state change, from the store. */
  apply(notice: LiveStateNotice): void {
    switch (notice.kind) {
      case "queue":
        this.promptQueue.apply(notice.sessionId, notice.owner, notice.items);
        break;
      case "interaction.requested":
        this.interactionRegistry.requested(notice.interaction, notice.owner);
        break;
      case "interaction.resolved":
        this.interactionRegistry.resolved(
          notice.sessionId,
          notice.owner,
          notice.interactionId,
          notice.resolution,
        );
        break;
      case "interaction.withdrawn":
        this.interactionRegistry.withdrawn(notice.sessionId, notice.owner, notice.interactionId);
        break;
      case "job.progress":
        this.remote.progress(notice.sessionId, notice.jobId, notice.progress);
        break;
      case "lease":
        this.#leaseMoved(notice.sessionId, notice.owner, notice.hostId);
        break;
    }
  }

  /** Another host took the lease (attached there) or it went (detached); this host's own moves are its attach/detach. */
  #leaseMoved(sessionId: string, owner: string, hostId: string | null): void {
    if (this.#hostId === undefined || hostId === this.#hostId) return;
    if (hostId === null) {
      this.remote.detach(sessionId);
      return;
    }
    // a local agent still here means its lease was just lost: the host detaches it first
    if (this.status.get(sessionId) !== undefined && !this.remote.has(sessionId)) return;
    this.#owners.set(sessionId, owner);
    this.remote.attach(sessionId, hostId);
  }

  /** Marks a session live for `owner`; the first status is `attached`. */
  attach(sessionId: string, owner: string): void {
    // the session's agent moved here from another host
    this.remote.detach(sessionId, false);
    this.#owners.set(sessionId, owner);
    this.status.set(sessionId, "attached", this.#hostId);
  }

  /**
   * `detached` ends the agent's process-local state (status, jobs). Queued prompts and pending
   * interactions are durable and stay: they belong to the session, not to its agent.
   */
  detach(sessionId: string, jobsEnd: "cancelled" | "interrupted" = "cancelled"): void {
    this.jobRegistry.forget(sessionId, jobsEnd);
    this.status.remove(sessionId);
    this.#owners.delete(sessionId);
  }

  /** Owner of a live session. */
  ownerOf(sessionId: string): string | undefined {
    return this.#owners.get(sessionId);
  }

  agents(): { sessionId: string; state: LiveAgentState; hostId?: string }[] {
    return this.status.all();
  }
  queue(sessionId: string): QueueItem[] {
    return this.promptQueue.items(sessionId);
  }
  jobs(sessionId: string): Job[] {
    return this.remote.jobs(sessionId) ?? this.jobRegistry.jobs(sessionId);
  }
  allJobs(): { sessionId: string; jobs: Job[] }[] {
    return [...this.jobRegistry.all(), ...this.remote.all()];
  }
  interactions(): Interaction[] {
    return this.interactionRegistry.pending().map((p) => p.interaction);
  }
  /** How much live state is in view now: queued prompts, pending interactions by kind, running jobs. */
  counts(): LiveCounts {
    let queued = 0;
    for (const { items } of this.promptQueue.all()) queued += items.length;
    const interactions = { approval: 0, question: 0 };
    for (const { interaction } of this.interactionRegistry.pending()) interactions[interaction.kind] += 1;
    let runningJobs = 0;
    for (const { jobs } of this.allJobs())
      for (const job of jobs) if (job.state === "running") runningJobs += 1;
    return { queued, interactions, runningJobs };
  }
  isLive(sessionId: string): boolean {
    return this.status.get(sessionId) !== undefined;
  }
  isRunning(sessionId: string): boolean {
    return this.status.get(sessionId) === "running";
  }

  subscribe(listener: (delta: ControlDelta) => void): () => void {
    return this.subscribeWithOwner((delta) => listener(delta));
  }

  /** Like `subscribe`, plus the session and owner each delta is about (for per-principal filtering). */
  subscribeWithOwner(listener: OwnedDeltaListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emitLocal(delta: Extract<ControlDelta, { sessionId: string }>): void {
    const owner = this.#owners.get(delta.sessionId);
    if (owner !== undefined) this.#emit(delta, delta.sessionId, owner);
  }

  #emit(delta: ControlDelta, sessionId: string, owner: string): void {
    for (const listener of this.#listeners) {
      try {
        listener(delta, sessionId, owner);
      } catch {
        // one faulty subscriber must not stop the others or the change that caused the delta
      }
    }
  }
}
