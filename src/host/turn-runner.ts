import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { EventDataOf, TurnTrigger } from "../../protocol/index.js";
import type { AgentDriver, TurnOutcome } from "../agents/agent.js";
import type { PromptRecord, SessionStore } from "../store/session-store.js";
import type { AgentRegistry } from "./agent-registry.js";
import type { LiveRegistry } from "./live/live-registry.js";
import type { PromptInput } from "./live/prompt-queue.js";
import { type LiveSession, RunningTurn } from "./live-session.js";
import type { NotificationHub } from "./notifications.js";
import { prepareAttachments } from "./prompt-attachments.js";
import { refusal } from "./store-outcomes.js";
import { HostTurnContext } from "./turn-context.js";
import { promptMessage } from "./user-message-shape.js";

export type BeginOutcome =
  | { status: "started"; seq: number; turnId: string }
  /** The prompt was already recorded by a concurrent call: its first answer stands. */
  | { status: "duplicate"; record: PromptRecord };

export interface TurnRunnerDeps {
  store: SessionStore;
  agent: AgentDriver;
  live: LiveRegistry;
  agents: AgentRegistry;
  notifications: NotificationHub;
  logger: Logger;
  now: () => number;
  /** True once the host stops accepting work: queued prompts then stay unstarted. */
  closing: () => boolean;
}

/**
 * Runs turns: opens one with `turn/start` + `user/message` in a single append, runs the agent,
 * closes it with `turn/end`, then starts the next queued prompt or marks the agent idle.
 */
export class TurnRunner {
  readonly #deps: TurnRunnerDeps;

  constructor(deps: TurnRunnerDeps) {
    this.#deps = deps;
  }

  /**
   * Claims the session for a turn synchronously (the caller checked `session.turn` is empty) and
   * resolves once the opening events are committed; the agent then runs in the background.
   */
  async begin(session: LiveSession, input: PromptInput, trigger: TurnTrigger): Promise<BeginOutcome> {
    const turn = new RunningTurn(randomUUID());
    session.turn = turn;
    this.#deps.agents.markRunning(session);
    try {
      const attachments = await prepareAttachments(this.#deps.store, session.owner, input);
      const message = promptMessage(input, attachments.stored);
      const prompt =
        input.clientMessageId !== undefined && trigger === "prompt"
          ? { clientMessageId: input.clientMessageId, record: { queued: false, turnId: turn.turnId } }
          : undefined;
      const outcome = await this.#deps.store.append(
        session.sessionId,
        [
          { type: "turn/start", data: { turnId: turn.turnId, trigger } },
          { type: "user/message", data: message },
        ],
        { at: this.#deps.now(), ...(prompt ? { prompt } : {}) },
      );
      if (outcome.status === "duplicate") {
        this.#release(session, turn);
        return outcome;
      }
      if (outcome.status !== "appended") throw refusal(session.sessionId, outcome);
      const seq =
        outcome.events.find((e) => e.type === "user/message")?.seq ?? outcome.events.at(-1)?.seq ?? 0;
      void this.#run(session, turn, { text: input.text, attachments: attachments.agent });
      return { status: "started", seq, turnId: turn.turnId };
    } catch (err) {
      this.#release(session, turn);
      throw err;
    }
  }

  async #run(session: LiveSession, turn: RunningTurn, prompt: HostTurnContext["prompt"]): Promise<void> {
    const { store, live, logger } = this.#deps;
    const ctx = new HostTurnContext({ store, live, session, turn, prompt, now: this.#deps.now });
    let outcome: TurnOutcome;
    try {
      outcome = await this.#deps.agent.runTurn(ctx);
    } catch (err) {
      outcome = { state: "failed", error: describe(err) };
    }
    turn.acceptsInterjections = false;
    live.interactionRegistry.withdrawTurn(session.sessionId, turn.turnId);
    const stop = turn.stopReason;
    const state = stop === "cancel" ? "cancelled" : stop === undefined ? outcome.state : "interrupted";
    // a deleted session has no log to close
    if (stop !== "delete") {
      const end: EventDataOf<"turn/end"> = { turnId: turn.turnId, state };
      if (state === "failed") end.error = outcome.error ?? "turn failed";
      try {
        const closed = await store.append(session.sessionId, [{ type: "turn/end", data: end }], {
          at: this.#deps.now(),
        });
        if (closed.status !== "appended")
          logger.debug({ sessionId: session.sessionId, status: closed.status }, "turn/end not recorded");
      } catch (err) {
        logger.error({ err, sessionId: session.sessionId }, "recording turn/end failed");
      }
      if (state === "failed") {
        this.#deps.notifications.publish(session.owner, {
          name: "agent.error",
          value: { sessionId: session.sessionId, message: end.error ?? "turn failed" },
        });
      }
    }
    this.#release(session, turn);
  }

  /** Frees the session after a turn; the next queued prompt starts in the same tick so none can overtake it. */
  #release(session: LiveSession, turn: RunningTurn): void {
    turn.finished();
    if (session.turn !== turn) return;
    session.turn = undefined;
    if (session.detached || this.#deps.closing()) return;
    const next = this.#deps.live.promptQueue.shift(session.sessionId);
    if (!next) {
      this.#deps.agents.markIdle(session);
      return;
    }
    this.begin(session, next.input, "queue").catch((err: unknown) => {
      this.#deps.logger.warn({ err, sessionId: session.sessionId }, "queued prompt could not start");
    });
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}
