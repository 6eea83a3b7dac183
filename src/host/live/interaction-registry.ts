import type { Interaction, Resolution } from "../../../protocol/index.js";

/** Why a pending interaction ended without an answer. */
export class InteractionWithdrawn extends Error {
  constructor(readonly interactionId: string) {
    super(`interaction ${interactionId} was withdrawn`);
    this.name = "InteractionWithdrawn";
  }
}

interface Pending {
  readonly interaction: Interaction;
  readonly settle: (resolution: Resolution) => void;
  readonly reject: (reason: unknown) => void;
}

interface Resolved {
  readonly sessionId: string;
  readonly resolution: Resolution;
  /** Settles once `interaction/resolved` is committed, so a repeated answer returns no earlier. */
  readonly committed: Promise<void>;
}

export type ClaimOutcome =
  | { status: "won"; interaction: Interaction; finish: (committed: Promise<void>) => void }
  | { status: "repeat"; committed: Promise<void> }
  | { status: "conflict"; winner: Resolution }
  | { status: "not_found" };

/** How many resolved interactions stay known for idempotent repeats. */
const RESOLVED_MEMORY = 4096;

/**
 * Pending approvals and questions with stable ids. The first answer wins synchronously (inside
 * `claim`), so concurrent answers can never both win; the rest are repeats or conflicts.
 */
export class InteractionRegistry {
  readonly #pending = new Map<string, Pending>();
  readonly #resolved = new Map<string, Resolved>();
  readonly #onRequested: (interaction: Interaction) => void;
  readonly #onResolved: (interaction: Interaction, resolution: Resolution) => void;
  readonly #onWithdrawn: (interaction: Interaction) => void;

  constructor(handlers: {
    requested: (interaction: Interaction) => void;
    resolved: (interaction: Interaction, resolution: Resolution) => void;
    withdrawn: (interaction: Interaction) => void;
  }) {
    this.#onRequested = handlers.requested;
    this.#onResolved = handlers.resolved;
    this.#onWithdrawn = handlers.withdrawn;
  }

  /** Registers a pending interaction; the promise settles with the winning answer or rejects when withdrawn. */
  request(interaction: Interaction): Promise<Resolution> {
    const answered = new Promise<Resolution>((settle, reject) => {
      this.#pending.set(interaction.interactionId, { interaction, settle, reject });
    });
    // a turn that stopped waiting (aborted) must not turn a later withdrawal into an unhandled rejection
    answered.catch(() => undefined);
    this.#onRequested(interaction);
    return answered;
  }

  get(interactionId: string): Interaction | undefined {
    return this.#pending.get(interactionId)?.interaction;
  }

  /** The session an interaction (pending or recently resolved) belongs to. */
  sessionOf(interactionId: string): string | undefined {
    return (
      this.#pending.get(interactionId)?.interaction.sessionId ?? this.#resolved.get(interactionId)?.sessionId
    );
  }

  resolution(interactionId: string): Resolution | undefined {
    return this.#resolved.get(interactionId)?.resolution;
  }

  /**
   * Decides the answer synchronously. The winner must call `finish` with the commit of
   * `interaction/resolved`; the waiting turn resumes only after that commit.
   */
  claim(interactionId: string, resolution: Resolution): ClaimOutcome {
    const done = this.#resolved.get(interactionId);
    if (done) {
      return sameResolution(done.resolution, resolution)
        ? { status: "repeat", committed: done.committed }
        : { status: "conflict", winner: done.resolution };
    }
    const pending = this.#pending.get(interactionId);
    if (!pending) return { status: "not_found" };
    this.#pending.delete(interactionId);
    let finishCommit!: (committed: Promise<void>) => void;
    const committed = new Promise<void>((resolve, reject) => {
      finishCommit = (c) => c.then(resolve, reject);
    });
    // a failed commit still counts as decided: the answer was accepted first
    committed.catch(() => undefined);
    this.#remember(interactionId, { sessionId: pending.interaction.sessionId, resolution, committed });
    return {
      status: "won",
      interaction: pending.interaction,
      finish: (commit) => {
        finishCommit(commit);
        commit.then(
          () => {
            this.#onResolved(pending.interaction, resolution);
            pending.settle(resolution);
          },
          (err: unknown) => pending.reject(err),
        );
      },
    };
  }

  pending(): Interaction[] {
    return [...this.#pending.values()].map((p) => p.interaction);
  }

  /** Withdraws pending interactions of one turn (it ended without an answer). */
  withdrawTurn(sessionId: string, turnId: string): void {
    for (const [id, p] of this.#pending) {
      if (p.interaction.sessionId === sessionId && p.interaction.turnId === turnId)
        this.#withdraw(id, p, true);
    }
  }

  /** Drops everything of a detached session; a later answer finds nothing. */
  forget(sessionId: string): void {
    for (const [id, p] of this.#pending)
      if (p.interaction.sessionId === sessionId) this.#withdraw(id, p, false);
    for (const [id, r] of this.#resolved) if (r.sessionId === sessionId) this.#resolved.delete(id);
  }

  #withdraw(id: string, pending: Pending, announce: boolean): void {
    this.#pending.delete(id);
    pending.reject(new InteractionWithdrawn(id));
    if (announce) this.#onWithdrawn(pending.interaction);
  }

  #remember(id: string, resolved: Resolved): void {
    this.#resolved.set(id, resolved);
    if (this.#resolved.size > RESOLVED_MEMORY) {
      const oldest = this.#resolved.keys().next().value;
      if (oldest !== undefined) this.#resolved.delete(oldest);
    }
  }
}

export function sameResolution(a: Resolution, b: Resolution): boolean {
  if ("outcome" in a) return "outcome" in b && a.outcome === b.outcome;
  return "answer" in b && a.answer === b.answer;
}
