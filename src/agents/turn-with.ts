import type { TurnContext } from "./agent.js";

/**
 * `turn` with some of its members replaced, every other one delegating to it: a wrapper that
 * watches or holds one member (metrics, a test's gate). Delegation is spelled out because the
 * host's context keeps its state in private fields, so spreading it would copy nothing that works.
 */
export function turnWith(turn: TurnContext, replaced: Partial<TurnContext>): TurnContext {
  return {
    sessionId: turn.sessionId,
    turnId: turn.turnId,
    model: turn.model,
    prompt: turn.prompt,
    signal: turn.signal,
    history: () => turn.history(),
    historyPage: (beforeSeq) => turn.historyPage(beforeSeq),
    emit: (event) => turn.emit(event),
    requestInteraction: (request) => turn.requestInteraction(request),
    takeInterjections: () => turn.takeInterjections(),
    startJob: (label) => turn.startJob(label),
    ...replaced,
  };
}
