import type { Interaction, Job, QueueItem, Resolution } from "../../../protocol/index.js";
import { AgentStatusBoard } from "./agent-status.js";
import { InteractionRegistry } from "./interaction-registry.js";
import { JobRegistry } from "./job-registry.js";
import type { ControlDelta, LiveAgentState, LiveState } from "./live-state.js";
import { PromptQueue } from "./prompt-queue.js";

/**
 * The host's process-local live state: one object composing the queue, interactions, jobs and
 * agent status, with one listener list fed in change order. It also remembers each live
 * session's owner so feeds can be filtered per principal.
 */
export class LiveRegistry implements LiveState {
  readonly #listeners = new Set<(delta: ControlDelta, sessionId: string) => void>();
  readonly #owners = new Map<string, string>();
  readonly promptQueue = new PromptQueue((sessionId, items) =>
    this.#emit({ kind: "queue", sessionId, items }, sessionId),
  );
  readonly interactionRegistry = new InteractionRegistry({
    requested: (interaction) =>
      this.#emit({ kind: "interaction.requested", interaction }, interaction.sessionId),
    resolved: (interaction, resolution) =>
      this.#emit(
        { kind: "interaction.resolved", interactionId: interaction.interactionId, resolution },
        interaction.sessionId,
      ),
    withdrawn: (interaction) =>
      this.#emit(
        { kind: "interaction.withdrawn", interactionId: interaction.interactionId },
        interaction.sessionId,
      ),
  });
  readonly jobRegistry = new JobRegistry((sessionId, jobs) =>
    this.#emit({ kind: "jobs", sessionId, jobs }, sessionId),
  );
  readonly status = new AgentStatusBoard((sessionId, state) =>
    this.#emit({ kind: "agent", sessionId, state }, sessionId),
  );

  /** Marks a session live for `owner`; the first status is `attached`. */
  attach(sessionId: string, owner: string): void {
    this.#owners.set(sessionId, owner);
    this.status.set(sessionId, "attached");
  }

  /** `detached` clears the session's queue, jobs and interactions (clients clear their mirror too). */
  detach(sessionId: string): void {
    this.promptQueue.forget(sessionId);
    this.jobRegistry.forget(sessionId);
    this.interactionRegistry.forget(sessionId);
    this.status.remove(sessionId);
    this.#owners.delete(sessionId);
  }

  /** Owner of a live session, or of the session a live interaction belongs to. */
  ownerOf(sessionId: string): string | undefined {
    return this.#owners.get(sessionId);
  }

  sessionOfInteraction(interactionId: string): string | undefined {
    return this.interactionRegistry.sessionOf(interactionId);
  }

  agents(): { sessionId: string; state: LiveAgentState }[] {
    return this.status.all();
  }
  queue(sessionId: string): QueueItem[] {
    return this.promptQueue.items(sessionId);
  }
  queues(): { sessionId: string; items: QueueItem[] }[] {
    return this.promptQueue.all();
  }
  jobs(sessionId: string): Job[] {
    return this.jobRegistry.jobs(sessionId);
  }
  allJobs(): { sessionId: string; jobs: Job[] }[] {
    return this.jobRegistry.all();
  }
  interactions(): Interaction[] {
    return this.interactionRegistry.pending();
  }
  interaction(interactionId: string): Interaction | undefined {
    return this.interactionRegistry.get(interactionId);
  }
  resolution(interactionId: string): Resolution | undefined {
    return this.interactionRegistry.resolution(interactionId);
  }
  isLive(sessionId: string): boolean {
    return this.status.get(sessionId) !== undefined;
  }
  isRunning(sessionId: string): boolean {
    return this.status.get(sessionId) === "running";
  }

  subscribe(listener: (delta: ControlDelta) => void): () => void {
    return this.subscribeWithSession((delta) => listener(delta));
  }

  /** Like `subscribe`, plus the session each delta is about (for per-principal filtering). */
  subscribeWithSession(listener: (delta: ControlDelta, sessionId: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit(delta: ControlDelta, sessionId: string): void {
    for (const listener of this.#listeners) {
      try {
        listener(delta, sessionId);
      } catch {
        // one faulty subscriber must not stop the others or the change that caused the delta
      }
    }
  }
}
