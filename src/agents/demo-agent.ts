import { randomUUID } from "node:crypto";
import type { Resolution } from "../../protocol/index.js";
import { abortableSleep } from "./abortable-sleep.js";
import type { AgentDriver, ParkedAnswer, TurnContext, TurnOutcome } from "./agent.js";
import { type DemoCommand, parseDemoCommand } from "./demo-command.js";

/** Progress reports of a `/job`. */
const JOB_STEPS = 10;

/**
 * The default agent: deterministic, no network. Plain text is echoed in a few deltas; the
 * commands `/stream N [ms]`, `/approve <action>`, `/ask <question>`, `/job <seconds>`, `/fail`
 * and `/sleep <ms>` drive every turn shape the console and the tests need.
 */
export class DemoAgent implements AgentDriver {
  readonly name = "demo";
  readonly defaultModel = "demo-fast";

  models(): { id: string; label: string }[] {
    return [
      { id: "demo-fast", label: "Demo (fast)" },
      { id: "demo-careful", label: "Demo (careful, shows reasoning)" },
    ];
  }

  async runTurn(turn: TurnContext): Promise<TurnOutcome> {
    try {
      return await this.#run(turn, parseDemoCommand(turn.prompt.text));
    } catch (err) {
      if (turn.signal.aborted) return { state: "cancelled" };
      throw err;
    }
  }

  /** A parked `/approve` or `/ask` answered after a restart: the same ending as the live path. */
  async continueTurn(turn: TurnContext, answers: ParkedAnswer[]): Promise<TurnOutcome> {
    try {
      for (const { interaction, resolution } of answers) {
        if (interaction.kind === "approval") {
          await finishApproval(
            turn,
            interaction.action ?? "proceed",
            interaction.toolCallId ?? randomUUID(),
            interaction.requestedAt,
            resolution,
          );
        } else {
          await finishQuestion(turn, resolution);
        }
      }
      return { state: "completed" };
    } catch (err) {
      if (turn.signal.aborted) return { state: "cancelled" };
      throw err;
    }
  }

  async #run(turn: TurnContext, command: DemoCommand): Promise<TurnOutcome> {
    const say = (text: string) => sayIn(turn, text);
    switch (command.kind) {
      case "text": {
        if (turn.model === "demo-careful")
          await turn.emit({ type: "reasoning/delta", text: "Echoing the prompt." });
        for (const chunk of splitEcho(`Echo: ${command.text}`)) await say(chunk);
        return { state: "completed" };
      }
      case "stream":
        for (let i = 1; i <= command.count; i++) {
          if (i > 1 && command.ms > 0) await abortableSleep(command.ms, turn.signal);
          await say(`chunk ${i} `);
        }
        return { state: "completed" };
      case "approve": {
        const toolCallId = randomUUID();
        await turn.emit({
          type: "tool/call",
          toolCallId,
          name: "demo.action",
          args: { action: command.action },
        });
        const started = Date.now();
        const resolution = await turn.requestInteraction({
          kind: "approval",
          action: command.action,
          toolCallId,
        });
        return finishApproval(turn, command.action, toolCallId, started, resolution);
      }
      case "ask": {
        const resolution = await turn.requestInteraction({ kind: "question", question: command.question });
        return finishQuestion(turn, resolution);
      }
      case "job": {
        const job = turn.startJob(`demo job (${command.seconds}s)`);
        void runJob(job, command.seconds * 1000);
        await say(`Started job ${job.jobId}`);
        return { state: "completed" };
      }
      case "fail":
        return { state: "failed", error: "demo failure requested with /fail" };
      case "sleep":
        await abortableSleep(command.ms, turn.signal);
        await say(`Slept ${command.ms} ms`);
        return { state: "completed" };
    }
  }
}

async function finishApproval(
  turn: TurnContext,
  action: string,
  toolCallId: string,
  started: number,
  resolution: Resolution,
): Promise<TurnOutcome> {
  const approved = "outcome" in resolution && resolution.outcome === "approve";
  await turn.emit({
    type: "tool/result",
    toolCallId,
    ok: approved,
    result: approved ? { action, done: true } : { action, denied: true },
    durationMs: Math.max(0, Date.now() - started),
  });
  await sayIn(turn, approved ? `Approved: ${action}` : `Denied: ${action}`);
  return { state: "completed" };
}

async function finishQuestion(turn: TurnContext, resolution: Resolution): Promise<TurnOutcome> {
  await sayIn(turn, `You answered: ${"answer" in resolution ? resolution.answer : resolution.outcome}`);
  return { state: "completed" };
}

function sayIn(turn: TurnContext, text: string): Promise<void> {
  return withInterjections(turn, text).then((noted) => turn.emit({ type: "assistant/delta", text: noted }));
}

/** Steered messages are acknowledged in the next delta, so the operator sees the turn read them. */
async function withInterjections(turn: TurnContext, text: string): Promise<string> {
  const taken = await turn.takeInterjections();
  if (taken.length === 0) return text;
  return taken.map((t) => `[noted: ${t}] `).join("") + text;
}

/**
 * 3 or 4 chunks (a reply is at least "Echo: "), split at fixed fractions so the same prompt
 * always gives the same deltas.
 */
export function splitEcho(reply: string): string[] {
  const count = Math.min(4, Math.max(1, reply.length));
  const size = Math.ceil(reply.length / count);
  const chunks: string[] = [];
  for (let i = 0; i < reply.length; i += size) chunks.push(reply.slice(i, i + size));
  return chunks;
}

async function runJob(job: ReturnType<TurnContext["startJob"]>, totalMs: number): Promise<void> {
  try {
    for (let step = 1; step <= JOB_STEPS; step++) {
      await abortableSleep(totalMs / JOB_STEPS, job.signal);
      if (step < JOB_STEPS) job.progress(step / JOB_STEPS);
    }
    job.complete();
  } catch {
    // cancelled with its session: the registry already recorded that
  }
}
