import type { Interaction, Resolution } from "../../../protocol/index.js";

/** Why a pending interaction ended without an answer. */
export class InteractionWithdrawn extends Error {
  constructor(readonly interactionId: string) {
    super(`interaction ${interactionId} was withdrawn`);
    this.name = "InteractionWithdrawn";
  }
}

interface Waiter {
  readonly settle: (resolution: Resolution) => void;
  readonly reject: (reason: unknown) => void;
}

interface Pending {
  readonly interaction: Interaction;
  readonly owner: string;
}

export interface InteractionDeltas {
  requested: (interaction: Interaction, owner: string) => void;
  resolved: (sessionId: string, owner: string, interactionId: string, resolution: Resolution) => void;
  withdrawn: (sessionId: string, owner: string, interactionId: string) => void;
}

/**
 * A cache of the store's pending interactions, kept by its live-state notices, plus the one thing
 * that is truly process-local: the promise a running turn awaits for its answer. The decision of
 * who answered first is taken by the store, inside one transaction.
 */
export class InteractionRegistry {
  readonly #pending = new Map<string, Pending>();
  readonly #waiters = new Map<string, Waiter>();
  /** Pending interaction ids per session, for `parkedTurn` without a scan. */
  readonly #bySession = new Map<string, Set<string>>();
  readonly #emit: InteractionDeltas;

  constructor(emit: InteractionDeltas) {
    this.#emit = emit;
  }

  /** A running turn waits here; register before the request is committed, so no answer is missed. */
  wait(interactionId: string): Promise<Resolution> {
    const answered = new Promise<Resolution>((settle, reject) => {
      this.#waiters.set(interactionId, { settle, reject });
    });
    // a turn that stopped waiting (aborted) must not turn a later withdrawal into an unhandled rejection
    answered.catch(() => undefined);
    return answered;
  }

  /** Stops waiting without an outcome (the request was never committed, or the host stops). */
  abandon(interactionId: string): void {
    this.#waiters.delete(interactionId);
  }

  hasWaiter(interactionId: string): boolean {
    return this.#waiters.has(interactionId);
  }

  /** A pending interaction as read from the store (at start), without a delta. */
  load(interaction: Interaction, owner: string): void {
    this.#add({ interaction, owner });
  }

  #add(pending: Pending): void {
    const { interactionId, sessionId } = pending.interaction;
    this.#pending.set(interactionId, pending);
    let ids = this.#bySession.get(sessionId);
    if (!ids) {
      ids = new Set();
      this.#bySession.set(sessionId, ids);
    }
    ids.add(interactionId);
  }

  #remove(sessionId: string, interactionId: string): Waiter | undefined {
    this.#pending.delete(interactionId);
    const ids = this.#bySession.get(sessionId);
    ids?.delete(interactionId);
    if (ids?.size === 0) this.#bySession.delete(sessionId);
    const waiter = this.#waiters.get(interactionId);
    this.#waiters.delete(interactionId);
    return waiter;
  }

  requested(interaction: Interaction, owner: string): void {
    this.#add({ interaction, owner });
    this.#emit.requested(interaction, owner);
  }

  resolved(sessionId: string, owner: string, interactionId: string, resolution: Resolution): void {
    const waiter = this.#remove(sessionId, interactionId);
    this.#emit.resolved(sessionId, owner, interactionId, resolution);
    waiter?.settle(resolution);
  }

  withdrawn(sessionId: string, owner: string, interactionId: string): void {
    const waiter = this.#remove(sessionId, interactionId);
    this.#emit.withdrawn(sessionId, owner, interactionId);
    waiter?.reject(new InteractionWithdrawn(interactionId));
  }

  get(interactionId: string): Interaction | undefined {
    return this.#pending.get(interactionId)?.interaction;
  }

  pending(): { interaction: Interaction; owner: string }[] {
    return [...this.#pending.values()];
  }

  /** The turn of a session's pending interactions that no turn of this process waits for. */
  parkedTurn(sessionId: string): string | undefined {
    for (const interactionId of this.#bySession.get(sessionId) ?? []) {
      if (!this.#waiters.has(interactionId)) return this.#pending.get(interactionId)?.interaction.turnId;
    }
    return undefined;
  }
}
