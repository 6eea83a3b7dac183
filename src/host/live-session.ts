/** Why a running turn was aborted; decides the state its `turn/end` records. */
export type TurnStop = "cancel" | "shutdown" | "delete";

/** The abort reason a stopped turn's signal carries: an Error, so agents that rethrow it stay readable. */
export class TurnStopped extends Error {
  constructor(readonly stop: TurnStop) {
    super(`turn stopped: ${stop}`);
    this.name = "AbortError";
  }
}

/** The turn a live session runs now. Set synchronously when the turn is decided, so concurrent prompts queue. */
export class RunningTurn {
  readonly abort = new AbortController();
  /** Steered texts the agent has not taken yet. */
  readonly interjections: string[] = [];
  /** False once the agent returned: a steer then becomes its own turn instead. */
  acceptsInterjections = true;
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

  stop(reason: TurnStop): void {
    if (!this.abort.signal.aborted) this.abort.abort(new TurnStopped(reason));
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

  constructor(
    readonly sessionId: string,
    readonly owner: string,
    public model: string,
  ) {}
}
