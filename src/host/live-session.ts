/**
 * Why a running turn was aborted; decides the state its `turn/end` records. `lost`: this host
 * lost the session's lease, so it records nothing more (the new owner closes the turn).
 */
export type TurnStop = "cancel" | "shutdown" | "delete" | "lost";

/** The abort reason a stopped turn's signal carries: an Error, so agents that rethrow it stay readable. */
export class TurnStopped extends Error {
  constructor(readonly stop: TurnStop) {
    super(`turn stopped: ${stop}`);
    this.name = "AbortError";
  }
}

/**
 * What a turn's context throws once its agent returned: the turn is closed (or being closed), so
 * an event, an interaction or a job written for it would land after its `turn/end`.
 */
export class TurnEnded extends Error {
  constructor(readonly turnId: string) {
    super(`turn ${turnId} has ended: its agent returned, so nothing more is written for it`);
    this.name = "TurnEnded";
  }
}

/** The turn a live session runs now. Set synchronously when the turn is decided, so concurrent prompts queue. */
export class RunningTurn {
  readonly abort = new AbortController();
  /**
   * Queue items steered into this turn that the agent has not taken yet, in the order steered and
   * each once (an item steered again is not listed twice), so at most the session's queue bound.
   */
  readonly #steered = new Set<string>();
  /**
   * Set once the agent returned (or was given up on after a stop), before the turn's `turn/end`:
   * a steer then becomes its own turn, and the turn's context writes nothing more (`TurnEnded`).
   */
  agentReturned = false;
  /** Interactions the agent is waiting on right now. */
  waiting = 0;
  /**
   * A turn of a previous process, parked on interactions: no agent runs it until they are all
   * answered (`TurnRunner.continueParked`). Prompts queue behind it like behind any turn.
   */
  parked = false;
  /** Stopped by shutdown while waiting on a person: its `turn/end` is not written, it stays parked. */
  leftParked = false;
  /** Gives back the attachment bytes this turn's prompt holds (see `TurnAttachmentBudget`); once is enough. */
  attachmentRelease: () => void = () => undefined;
  /** Settles when the turn is fully over (its `turn/end` committed or given up, or it never opened). */
  readonly done: Promise<void>;
  readonly finished: () => void;

  constructor(readonly turnId: string) {
    let finished!: () => void;
    this.done = new Promise<void>((resolve) => {
      finished = resolve;
    });
    this.finished = finished;
  }

  steer(itemId: string): void {
    this.#steered.add(itemId);
  }

  /** The items steered since the last take, in the order steered; they are no longer listed here. */
  takeSteered(): string[] {
    const itemIds = [...this.#steered];
    this.#steered.clear();
    return itemIds;
  }

  stop(reason: TurnStop): void {
    if (this.abort.signal.aborted) return;
    if (reason === "shutdown" && this.waiting > 0) this.leftParked = true;
    this.abort.abort(new TurnStopped(reason));
  }

  get stopReason(): TurnStop | undefined {
    const reason: unknown = this.abort.signal.reason;
    return reason instanceof TurnStopped ? reason.stop : undefined;
  }
}

/** One session with a live (attached) agent. */
export class LiveSession {
  turn: RunningTurn | undefined;
  idleTimer: NodeJS.Timeout | undefined;
  /** Set when the session detached; work scheduled for it afterwards is dropped. */
  detached = false;
  /** Prompts being queued (their store write not yet committed); the queue's order waits for them. */
  pendingEnqueues = 0;
  /** `resume` calls under way that resolved this session (see `ActivationPolicy.run`). */
  calls = 0;
  /**
   * Attached for a `resume` call, and no call that resolved it since has succeeded: if the last of
   * them is refused too, nothing asked this agent for work and it goes again.
   */
  attachedForCalls = false;

  constructor(
    readonly sessionId: string,
    readonly owner: string,
    public model: string,
  ) {}
}
