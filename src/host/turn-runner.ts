import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { type EventDataOf, type NewEvent, SessionmuxError, type TurnTrigger } from "../../protocol/index.js";
import { abortableSleep } from "../agents/abortable-sleep.js";
import type { AgentDriver, ParkedAnswer, TurnContext, TurnOutcome } from "../agents/agent.js";
import type { HostStore, StoredQueueItem } from "../store/live-state-store.js";
import type { AppendOptions, AppendOutcome, PromptRecord } from "../store/session-store.js";
import type { AgentRegistry } from "./agent-registry.js";
import { checkedOutcome } from "./checked-outcome.js";
import { committedAnyway } from "./committed-anyway.js";
import type { Ownership } from "./host-leases.js";
import type { LiveRegistry } from "./live/live-registry.js";
import { type PromptInput, queuedText } from "./live/prompt-queue.js";
import { type LiveSession, RunningTurn } from "./live-session.js";
import { NotOwner } from "./not-owner.js";
import type { NotificationHub } from "./notifications.js";
import { discardKept, type PreparedAttachments, prepareAttachments } from "./prompt-attachments.js";
import { failedStartEvents, startFailure, startMayRecover } from "./queued-start-failure.js";
import { untilStoppedOrGrace } from "./stop-grace.js";
import { refusal } from "./store-outcomes.js";
import { isStoreFailure, type StoreRetry, storeRetryDelay } from "./store-retry.js";
import { heldWhenRefused, type TurnAttachmentBudget } from "./turn-attachment-budget.js";
import { HostTurnContext } from "./turn-context.js";
import { promptMessage } from "./user-message-shape.js";

type Started = { status: "started"; seq: number; turnId: string };
/** The prompt was already recorded by a concurrent call: its first answer stands. */
type Duplicate = { status: "duplicate"; record: PromptRecord };
/** The queued item to start was removed meanwhile: nothing started. */
type QueueItemGone = { status: "queue_item_gone" };

export interface TurnRunnerDeps {
  store: HostStore;
  agent: AgentDriver;
  live: LiveRegistry;
  agents: AgentRegistry;
  /** The fence every append on an agent's behalf carries; null once this host lost the session. */
  ownership: Ownership;
  notifications: NotificationHub;
  logger: Logger;
  now: () => number;
  /** True once the host stops accepting work: queued prompts then stay unstarted. */
  closing: () => boolean;
  /** Stored event data an agent's `turn.history()` returns at most. */
  maxHistoryBytes: number;
  /** The attachment bytes each principal's running turns hold: a turn's are given back when it ends. */
  attachmentBudget: TurnAttachmentBudget;
  /** How long a stopped turn waits for its agent to return before it is closed without it. */
  stopGraceMs: number;
  /** The pause before a queued prompt's start or a `turn/end` the store failed to write is tried again. */
  storeRetry: StoreRetry;
}

type Drive = (ctx: TurnContext) => Promise<TurnOutcome | "interrupted">;

/**
 * Runs turns: opens one with `turn/start` + `user/message` in a single append (which also takes a
 * queued prompt off the durable queue), runs the agent, closes it with `turn/end`, then starts the
 * next queued prompt or marks the agent idle.
 */
export class TurnRunner {
  readonly #deps: TurnRunnerDeps;
  /** Aborted when the host stops: pauses before another attempt end at once. */
  readonly #stopped = new AbortController();
  /**
   * Sessions whose next queued prompt failed to start: how often in a row, the pending retry, and
   * whether a failure of the run was warned of.
   */
  readonly #startRetries = new Map<
    string,
    { failures: number; timer?: ReturnType<typeof setTimeout>; forgetWake?: () => void; warned?: boolean }
  >();

  constructor(deps: TurnRunnerDeps) {
    this.#deps = deps;
  }

  /** The host stops: no queued prompt is tried again, and a `turn/end` still refused is given up. */
  stop(): void {
    this.#stopped.abort();
    for (const retry of this.#startRetries.values()) cancelPending(retry);
    this.#startRetries.clear();
  }

  /**
   * Claims the session for a turn synchronously (the caller checked `session.turn` is empty) and
   * resolves once the opening events are committed; the agent then runs in the background.
   * `itemId` names the queued item this prompt comes from.
   */
  begin(session: LiveSession, input: PromptInput, trigger: TurnTrigger): Promise<Started | Duplicate>;
  begin(
    session: LiveSession,
    input: PromptInput,
    trigger: TurnTrigger,
    itemId: string,
  ): Promise<Started | QueueItemGone>;
  async begin(
    session: LiveSession,
    input: PromptInput,
    trigger: TurnTrigger,
    itemId?: string,
  ): Promise<Started | Duplicate | QueueItemGone> {
    const turn = new RunningTurn(randomUUID());
    session.turn = turn;
    this.#deps.agents.markRunning(session);
    let attachments: PreparedAttachments | undefined;
    try {
      // counted before any upload is read; a queued prompt refused here starts again later (`kick`)
      attachments = await prepareAttachments(this.#deps.store, session.owner, input, {
        hold: (bytes) => {
          turn.attachmentRelease = this.#deps.attachmentBudget.take(
            session.owner,
            bytes,
            itemId !== undefined,
          );
        },
      });
      const message = promptMessage(input, attachments.stored);
      const prompt =
        input.clientMessageId !== undefined && itemId === undefined
          ? { clientMessageId: input.clientMessageId, record: { queued: false, turnId: turn.turnId } }
          : undefined;
      const fence = this.#deps.ownership.fence(session.sessionId);
      if (!fence) throw new NotOwner(session.sessionId, null);
      const outcome = await this.#openingAppend(
        session.sessionId,
        turn.turnId,
        [
          { type: "turn/start", data: { turnId: turn.turnId, trigger } },
          { type: "user/message", data: message },
        ],
        {
          at: this.#deps.now(),
          ...fence,
          ...(prompt ? { prompt } : {}),
          // the item as read here: one edited since is not started with its old text
          ...(itemId !== undefined
            ? { dequeue: { itemId, turnId: turn.turnId, read: queuedText(input) } }
            : {}),
        },
      );
      if (outcome.status === "fenced") {
        // answered only to an append under a lease, so `fence.fence` is set
        if (fence.fence) this.#deps.ownership.fenced(fence.fence);
        throw new NotOwner(session.sessionId, null);
      }
      if (outcome.status === "duplicate" || outcome.status === "queue_item_gone") {
        this.#release(session, turn);
        await discardKept(this.#deps.store, attachments);
        return outcome;
      }
      if (outcome.status !== "appended") throw refusal(session.sessionId, outcome);
      const seq =
        outcome.events.find((e) => e.type === "user/message")?.seq ?? outcome.events.at(-1)?.seq ?? 0;
      const ctx = this.#context(session, turn, { text: input.text, attachments: attachments.agent });
      void this.#run(session, turn, ctx, (c) => this.#deps.agent.runTurn(c));
      return { status: "started", seq, turnId: turn.turnId };
    } catch (err) {
      // a queued prompt that failed to start is tried again after a pause (see `kick`), not at once
      this.#release(session, turn, itemId === undefined);
      if (attachments) await discardKept(this.#deps.store, attachments);
      throw err;
    }
  }

  /**
   * A turn's opening append. One that failed on the store may still have committed (PostgreSQL:
   * its connection died after its COMMIT went out, before the answer came back); left so, the
   * turn stayed open in the log with no agent to run or end it, and the prompt sent again was
   * answered with that turn. Its `turn/start` found among the log's newest events, the append is
   * taken as done; a read that fails too leaves the failure as it was.
   */
  async #openingAppend<O extends AppendOptions>(
    sessionId: string,
    turnId: string,
    events: NewEvent[],
    options: O,
  ): Promise<AppendOutcome<O>> {
    try {
      return await this.#deps.store.append(sessionId, events, options);
    } catch (err) {
      if (!isStoreFailure(err)) throw err;
      const opened = await committedAnyway(
        this.#deps.store,
        sessionId,
        (e) => e.type === "turn/start" && e.data.turnId === turnId,
        events.length,
      );
      if (!opened) throw err;
      this.#deps.logger.warn(
        { err, sessionId, turnId },
        "a turn's opening append failed, yet the turn is in the log; it runs",
      );
      return { status: "appended", ...opened };
    }
  }

  /**
   * Every interaction of a parked turn is answered: the agent continues it (`continueTurn`), or,
   * without that (or when its answers cannot be read), the turn is closed as interrupted. Runs at
   * most once per parked turn.
   */
  async continueParked(session: LiveSession, turnId: string): Promise<void> {
    const turn = session.turn;
    if (!turn?.parked || turn.turnId !== turnId) return;
    turn.parked = false;
    this.#deps.agents.markRunning(session);
    try {
      const answers: ParkedAnswer[] = [];
      for (const stored of await this.#deps.store.turnInteractions(session.sessionId, turnId)) {
        if (stored.state === "resolved" && stored.resolution)
          answers.push({ interaction: stored.interaction, resolution: stored.resolution });
      }
      const agent = this.#deps.agent;
      const ctx = this.#context(session, turn, { text: "", attachments: [] });
      void this.#run(session, turn, ctx, (c) =>
        agent.continueTurn ? agent.continueTurn(c, answers) : Promise.resolve("interrupted" as const),
      );
    } catch (err) {
      // its answers could not be read: the turn cannot go on, so it is closed before the next starts
      this.#deps.logger.error({ err, sessionId: session.sessionId }, "a parked turn could not continue");
      await this.#close(session, turn, { turnId, state: "interrupted" });
      this.#release(session, turn);
    }
  }

  /** Closes a parked turn nobody will answer (cancelled): its pending interactions are withdrawn. */
  async endParked(session: LiveSession): Promise<boolean> {
    const turn = session.turn;
    if (!turn?.parked) return false;
    turn.parked = false;
    await this.#close(session, turn, { turnId: turn.turnId, state: "cancelled" });
    this.#release(session, turn);
    return true;
  }

  /** Starts the next queued prompt when the session is free; marks the agent idle when none is. */
  kick(session: LiveSession): void {
    if (session.turn || session.detached || this.#deps.closing()) return;
    const next = this.#deps.live.promptQueue.first(session.sessionId);
    if (!next) {
      // a prompt still being queued kicks again once its write commits
      if (session.pendingEnqueues === 0) this.#deps.agents.markIdle(session);
      return;
    }
    const { sessionId } = session;
    const pending = this.#startRetries.get(sessionId);
    if (pending) cancelPending(pending);
    this.begin(session, next.input, "queue", next.itemId).then(
      () => this.#startRetries.delete(sessionId),
      (err: unknown) => {
        if (this.#stopped.signal.aborted) return;
        if (startMayRecover(err)) return this.#retryStart(session, err);
        this.#failQueued(session, next, err).then(
          () => this.#startRetries.delete(sessionId),
          (recordErr: unknown) => {
            if (!this.#stopped.signal.aborted) this.#retryStart(session, recordErr);
          },
        );
      },
    );
  }

  /** Tries the session's next queued prompt again after a pause, or once attachment room comes back. */
  #retryStart(session: LiveSession, err: unknown): void {
    const { sessionId } = session;
    const retry = this.#startRetries.get(sessionId);
    const failures = (retry?.failures ?? 0) + 1;
    const retryInMs = storeRetryDelay(this.#deps.storeRetry, failures);
    // warned once per run of failures: a full disk refuses every attempt until it has room; a
    // principal's turns holding their attachment budget is no fault, it waits for a turn's end,
    // and a fault that follows it in the same run is still the first one warned of
    const overloaded = err instanceof SessionmuxError && err.code === "overloaded";
    const warned = retry?.warned === true;
    const level = !warned && !overloaded ? "warn" : "debug";
    this.#deps.logger[level]({ err, sessionId, failures, retryInMs }, "queued prompt could not start");
    const again = () => {
      // a session detached or emptied meanwhile keeps no retry state
      if (session.detached || !this.#deps.live.promptQueue.first(sessionId))
        this.#startRetries.delete(sessionId);
      this.kick(session);
    };
    const state = { failures, warned: warned || !overloaded };
    // refused for room, it waits for the principal's next turn to end, which is when room comes
    const held = heldWhenRefused(err);
    if (held !== undefined)
      this.#startRetries.set(sessionId, {
        ...state,
        forgetWake: this.#deps.attachmentBudget.whenRoom(session.owner, held, again),
      });
    else {
      const timer = setTimeout(again, retryInMs);
      timer.unref();
      this.#startRetries.set(sessionId, { ...state, timer });
    }
  }

  /**
   * A queued prompt whose start failed in a way no retry mends: its turn is opened and ended
   * `failed` with the failure's code in one append that also takes it off the queue, so the
   * reader sees why it never ran and the prompts behind it run. Should that append be refused
   * too (by something of the prompt's own), the item is only removed, as the error log says.
   * Rejects when the store could not write: the start is then tried again after a pause.
   */
  async #failQueued(session: LiveSession, item: StoredQueueItem, cause: unknown): Promise<void> {
    if (session.turn || session.detached || this.#deps.closing()) return;
    const { store, logger, ownership } = this.#deps;
    const { sessionId } = session;
    const { itemId, input } = item;
    const turn = new RunningTurn(randomUUID());
    session.turn = turn;
    const failure = startFailure(cause);
    logger.error(
      { err: cause, sessionId, itemId, turnId: turn.turnId },
      "a queued prompt could not start and will not on a retry; its turn ends failed",
    );
    try {
      const fence = ownership.fence(sessionId);
      if (!fence) throw new NotOwner(sessionId, null);
      const outcome = await store.append(sessionId, failedStartEvents(turn.turnId, input, failure), {
        at: this.#deps.now(),
        ...fence,
        dequeue: { itemId, turnId: turn.turnId, read: queuedText(input) },
      });
      if (outcome.status === "fenced" && fence.fence) ownership.fenced(fence.fence);
      if (outcome.status === "appended")
        this.#deps.notifications.publish(session.owner, {
          name: "agent.error",
          value: { sessionId, message: failure.error },
        });
    } catch (err) {
      if (isStoreFailure(err) || err instanceof NotOwner) {
        this.#release(session, turn, false);
        throw err;
      }
      logger.error(
        { err, sessionId, itemId },
        "recording a queued prompt's failed start failed; it is removed",
      );
      try {
        await store.removeQueueItem(sessionId, itemId);
      } catch (removeErr) {
        this.#release(session, turn, false);
        throw removeErr;
      }
    }
    this.#release(session, turn);
  }

  #context(session: LiveSession, turn: RunningTurn, prompt: HostTurnContext["prompt"]): HostTurnContext {
    const { store, live, now, ownership, maxHistoryBytes } = this.#deps;
    return new HostTurnContext({ store, live, ownership, session, turn, prompt, now, maxHistoryBytes });
  }

  async #run(session: LiveSession, turn: RunningTurn, ctx: TurnContext, drive: Drive): Promise<void> {
    let outcome: TurnOutcome | "interrupted";
    try {
      const { stopGraceMs } = this.#deps;
      const ran = await untilStoppedOrGrace(drive(ctx), turn.abort.signal, stopGraceMs);
      if (ran === "abandoned") {
        const { sessionId } = session;
        this.#deps.logger.warn(
          { sessionId, turnId: turn.turnId, stopGraceMs },
          "the agent did not return within its grace after the turn was stopped; the turn ends without it",
        );
      }
      outcome = ran === "abandoned" || ran === "interrupted" ? "interrupted" : checkedOutcome(ran);
    } catch (err) {
      outcome = { state: "failed", error: describe(err) };
    }
    // the agent returned (or was given up on): its prompt's attachments are no longer held for it
    turn.attachmentRelease();
    turn.agentReturned = true;
    const stop = turn.stopReason;
    // a deleted session has no log to close; a turn left waiting on a person stays open, parked;
    // a host that lost the lease writes nothing more (the new owner closes the turn)
    if (stop !== "delete" && stop !== "lost" && !turn.leftParked) {
      const state =
        stop === "cancel"
          ? "cancelled"
          : stop !== undefined || outcome === "interrupted"
            ? "interrupted"
            : outcome.state;
      const end: EventDataOf<"turn/end"> = { turnId: turn.turnId, state };
      if (state === "failed") end.error = (outcome !== "interrupted" && outcome.error) || "turn failed";
      await this.#close(session, turn, end);
    }
    this.#release(session, turn);
  }

  /**
   * `turn/end` withdraws the turn's pending interactions in the same transaction (store rule).
   * A store that cannot write (a full disk) is asked again after a pause, and the session stays
   * busy meanwhile: the next turn starting first would leave this one open in the log for good.
   * A host that stops gives up; its next start closes the turn `interrupted`.
   */
  async #close(session: LiveSession, turn: RunningTurn, end: EventDataOf<"turn/end">): Promise<void> {
    const { store, logger, ownership } = this.#deps;
    const { sessionId } = session;
    for (let failures = 1; ; failures++) {
      const fence = ownership.fence(sessionId);
      if (!fence) return;
      try {
        const closed = await store.append(sessionId, [{ type: "turn/end", data: end }], {
          at: this.#deps.now(),
          ...fence,
        });
        if (closed.status === "fenced" && fence.fence) ownership.fenced(fence.fence);
        else if (closed.status !== "appended")
          logger.debug({ sessionId, status: closed.status }, "turn/end not recorded");
        break;
      } catch (err) {
        const { turnId } = turn;
        if (!isStoreFailure(err) || this.#stopped.signal.aborted) {
          logger.error({ err, sessionId, turnId }, "recording turn/end failed");
          break;
        }
        const retryInMs = storeRetryDelay(this.#deps.storeRetry, failures);
        const level = failures === 1 ? "warn" : "debug";
        logger[level](
          { err, sessionId, turnId, failures, retryInMs },
          "recording turn/end failed; trying again",
        );
        try {
          await abortableSleep(retryInMs, this.#stopped.signal);
        } catch {
          logger.error({ err, sessionId, turnId }, "recording turn/end failed");
          break;
        }
      }
    }
    if (end.state === "failed") {
      this.#deps.notifications.publish(session.owner, {
        name: "agent.error",
        value: { sessionId: session.sessionId, message: end.error ?? "turn failed" },
      });
    }
  }

  /** Frees the session after a turn; the next queued prompt starts in the same tick so none can overtake it. */
  #release(session: LiveSession, turn: RunningTurn, startNext = true): void {
    turn.attachmentRelease();
    turn.finished();
    if (session.turn !== turn) return;
    session.turn = undefined;
    if (startNext) this.kick(session);
  }
}

/** Forgets a queued start's pending retry, whether a timer or a wait for attachment room. */
function cancelPending(retry: { timer?: ReturnType<typeof setTimeout>; forgetWake?: () => void }): void {
  clearTimeout(retry.timer);
  retry.forgetWake?.();
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
