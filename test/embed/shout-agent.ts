import { randomUUID } from "node:crypto";
import type { AgentDriver, TurnContext, TurnOutcome } from "../../src/index.js";

/** A custom agent: runs one tool (`upper`) on the prompt and streams its result back. */
export class ShoutAgent implements AgentDriver {
  readonly name = "shout";
  readonly defaultModel = "shout-1";

  models() {
    return [{ id: "shout-1", label: "Shout" }];
  }

  async runTurn(turn: TurnContext): Promise<TurnOutcome> {
    const toolCallId = randomUUID();
    const args = { text: turn.prompt.text };
    await turn.emit({ type: "tool/call", toolCallId, name: "upper", args });
    const started = Date.now();
    const loud = args.text.toUpperCase();
    await turn.emit({
      type: "tool/result",
      toolCallId,
      ok: true,
      result: loud,
      durationMs: Date.now() - started,
    });
    for (const word of loud.split(/(?<= )/)) {
      if (turn.signal.aborted) return { state: "cancelled" };
      await turn.emit({ type: "assistant/delta", text: word });
    }
    return { state: "completed" };
  }
}
