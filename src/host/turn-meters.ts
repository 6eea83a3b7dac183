import type { Logger } from "pino";
import type { AgentDriver, AgentEmit, ParkedAnswer, TurnContext, TurnOutcome } from "../agents/agent.js";
import { turnWith } from "../agents/turn-with.js";
import { checkedOutcome } from "./checked-outcome.js";

/** What the host reports about turns; implemented by the metrics registry in transport. */
export interface TurnMeters {
  /** A turn's agent run ended, in `state` ("failed" also when the agent threw; "cancelled" when what it threw was its turn's stop). */
  turnEnded(seconds: number, state: TurnOutcome["state"]): void;
  /** The first assistant or reasoning text of a turn was committed. */
  firstToken(seconds: number): void;
}

/**
 * Wraps an agent so every turn is timed and every failure logged, without the turn runner
 * knowing: the durations are those of `runTurn` (or `continueTurn`), from its call to its outcome.
 */
export function meteredAgent(agent: AgentDriver, meters: TurnMeters, logger: Logger): AgentDriver {
  const measured = async (turn: TurnContext, run: (timed: TurnContext) => Promise<TurnOutcome>) => {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    let firstTokenSeen = false;
    // what a refused emit rejected with: an agent that lets it through did not fail by itself
    const refusedWrites = new WeakSet<object>();
    const timed = turnWith(turn, {
      emit: async (event: AgentEmit) => {
        await turn.emit(event).catch((err: unknown) => {
          if (typeof err === "object" && err !== null) refusedWrites.add(err);
          throw err;
        });
        if (!firstTokenSeen && (event.type === "assistant/delta" || event.type === "reasoning/delta")) {
          firstTokenSeen = true;
          meters.firstToken(seconds());
        }
      },
    });
    const where = { sessionId: turn.sessionId, turnId: turn.turnId, agent: agent.name, model: turn.model };
    try {
      // an agent in plain JavaScript may resolve with anything: read its outcome as the log will
      const outcome = checkedOutcome(await run(timed));
      meters.turnEnded(seconds(), outcome.state);
      if (outcome.state === "failed") logger.warn({ ...where, error: outcome.error }, "agent turn failed");
      return outcome;
    } catch (err) {
      // an emit refused because the turn was stopped (cancel, shutdown, delete) ends the run as
      // the stop does, cancelled: counted failed and logged as a throw, every cancel of an agent
      // that lets that refusal through (the README's own agent does) would read as a fault
      if (endedByStop(turn.signal, err)) {
        meters.turnEnded(seconds(), "cancelled");
        logger.debug({ ...where, stop: (err as Error).message }, "agent run ended by its turn's stop");
      } else if (typeof err === "object" && err !== null && refusedWrites.has(err)) {
        // the store refused the turn's event (its database away, a full disk): said where the
        // store fails, and not the agent's fault, so not an error of the agent's
        meters.turnEnded(seconds(), "failed");
        logger.warn({ ...where, err }, "a turn's event could not be written: the turn ends");
      } else {
        meters.turnEnded(seconds(), "failed");
        logger.error({ ...where, err }, "agent threw during a turn");
      }
      throw err;
    }
  };
  const continueTurn = agent.continueTurn?.bind(agent);
  return {
    name: agent.name,
    defaultModel: agent.defaultModel,
    models: () => agent.models(),
    ...(agent.close ? { close: () => agent.close?.() ?? Promise.resolve() } : {}),
    runTurn: (turn) => measured(turn, (timed) => agent.runTurn(timed)),
    // a parked turn continued after a restart is timed from its continuation
    ...(continueTurn
      ? {
          continueTurn: (turn: TurnContext, answers: ParkedAnswer[]) =>
            measured(turn, (timed) => continueTurn(timed, answers)),
        }
      : {}),
  };
}

/** Whether `err` is the turn's stop coming back through the agent: its signal's reason, or an abort. */
function endedByStop(signal: AbortSignal, err: unknown): boolean {
  if (!signal.aborted) return false;
  return err === signal.reason || (err instanceof Error && err.name === "AbortError");
}
