import type { LanguageModel, ToolSet } from "ai";
import { type Logger, pino } from "pino";
import type { Resolution } from "../../protocol/index.js";
import type { AgentDriver, ParkedAnswer, TurnContext, TurnOutcome } from "./agent.js";
import { AgentLimitError, type AgentLimits, resolveAgentLimits } from "./agent-limits.js";
import { checkAiSdkAgentOptions } from "./agent-option-checks.js";
import { type AgentTool, declaredTools, toolsByName } from "./agent-tool.js";
import { chatHistory, recentHistory } from "./chat-history.js";
import { describeFailure } from "./failure-cause.js";
import { streamStep } from "./model-step.js";
import { type ApprovalAnswers, runStepTools } from "./step-tools.js";
import { type ModelToolCall, TurnTranscript } from "./turn-transcript.js";

export interface AiSdkAgentOptions {
  /** @default "ai-sdk" */
  name?: string;
  /** The models a session may pick; the first is the default. */
  models: { id: string; label: string }[];
  /** The AI SDK model for a model id, from any provider (`openai("gpt-4o")`, `anthropic(…)`, …). */
  languageModel: (modelId: string) => LanguageModel;
  /** Tools the model may call; the driver runs them and records each call and result. */
  tools?: AgentTool[];
  system?: string;
  limits?: Partial<AgentLimits>;
  /** Retries of a model call that failed before it streamed anything. @default 2 */
  maxRetries?: number;
  /** Failed turns are logged here with their cause. @default a disabled logger */
  logger?: Logger;
}

/**
 * An agent on the Vercel AI SDK, with a tool loop: each step streams the model's text and tool
 * calls into the log, runs the calls (asking the operator first for those that need approval),
 * records their results, hands steered interjections to the model, and calls it again until it
 * answers without a tool call.
 */
export class AiSdkAgent implements AgentDriver {
  readonly name: string;
  readonly defaultModel: string;
  readonly #options: AiSdkAgentOptions;
  readonly #tools: ReadonlyMap<string, AgentTool>;
  readonly #declared: ToolSet;
  readonly #limits: AgentLimits;
  readonly #logger: Logger;

  constructor(options: AiSdkAgentOptions) {
    checkAiSdkAgentOptions(options);
    const first = options.models[0];
    if (!first) throw new TypeError("an AI SDK agent needs at least one model");
    this.name = options.name ?? "ai-sdk";
    this.defaultModel = first.id;
    this.#options = options;
    this.#tools = toolsByName(options.tools ?? []);
    this.#declared = declaredTools(this.#tools);
    this.#limits = resolveAgentLimits(options.limits);
    this.#logger = options.logger ?? pino({ enabled: false });
  }

  models(): { id: string; label: string }[] {
    return this.#options.models.map((m) => ({ ...m }));
  }

  runTurn(turn: TurnContext): Promise<TurnOutcome> {
    return this.#guarded(turn, async () => {
      const maxChars = this.#limits.maxHistoryChars;
      const history = chatHistory(await recentHistory(turn, maxChars), turn.turnId, maxChars);
      const transcript = new TurnTranscript(history);
      transcript.addUser(turn.prompt.text);
      return this.#loop(turn, transcript, []);
    });
  }

  /**
   * A turn parked on approvals when its host stopped: the transcript is rebuilt from the log, the
   * calls without a result run now (those denied are recorded denied), and the loop goes on.
   */
  continueTurn(turn: TurnContext, answers: ParkedAnswer[]): Promise<TurnOutcome> {
    return this.#guarded(turn, async () => {
      const maxChars = this.#limits.maxHistoryChars;
      const log = await recentHistory(turn, maxChars);
      const { transcript, pending } = TurnTranscript.fromLog(log, turn.turnId, maxChars);
      const byCall = new Map<string, Resolution>();
      for (const { interaction, resolution } of answers) {
        if (interaction.toolCallId !== undefined) byCall.set(interaction.toolCallId, resolution);
      }
      return this.#loop(turn, transcript, pending, byCall);
    });
  }

  async #loop(
    turn: TurnContext,
    transcript: TurnTranscript,
    pending: ModelToolCall[],
    answers?: ApprovalAnswers,
  ): Promise<TurnOutcome> {
    const toolTimeoutMs = this.#limits.toolTimeoutMs;
    if (pending.length > 0)
      await runStepTools(turn, this.#tools, pending, transcript, {
        toolTimeoutMs,
        ...(answers ? { answers } : {}),
      });
    const maxSteps = this.#limits.maxStepsPerTurn;
    let interjections = await turn.takeInterjections();
    for (let step = 1; ; step++) {
      for (const text of interjections) transcript.addUser(text);
      const calls = await streamStep(turn, transcript, {
        model: this.#options.languageModel(this.#modelFor(turn)),
        ...(this.#options.system !== undefined ? { system: this.#options.system } : {}),
        tools: this.#declared,
        limits: this.#limits,
        maxRetries: this.#options.maxRetries ?? 2,
      });
      if (calls.length > 0) await runStepTools(turn, this.#tools, calls, transcript, { toolTimeoutMs });
      // steered while the model answered: it reads them now rather than in a later turn
      interjections = await turn.takeInterjections();
      if (calls.length === 0 && interjections.length === 0) return { state: "completed" };
      if (step >= maxSteps) {
        throw new AgentLimitError(
          "too_many_steps",
          maxSteps,
          `the model needed more than ${maxSteps} steps in one turn`,
        );
      }
    }
  }

  async #guarded(turn: TurnContext, run: () => Promise<TurnOutcome>): Promise<TurnOutcome> {
    try {
      return await run();
    } catch (err) {
      if (turn.signal.aborted) return { state: "cancelled" };
      const error = describeFailure(err);
      this.#logger.warn(
        { err, sessionId: turn.sessionId, turnId: turn.turnId, agent: this.name, model: turn.model, error },
        "agent turn failed",
      );
      return { state: "failed", error };
    }
  }

  #modelFor(turn: TurnContext): string {
    return this.#options.models.some((m) => m.id === turn.model) ? turn.model : this.defaultModel;
  }
}
