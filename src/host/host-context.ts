import type { Logger } from "pino";
import type { CallMethod, ParamsOf, ResultOf } from "../../protocol/index.js";
import type { AgentDriver } from "../agents/agent.js";
import type { HostStore, QueueLimits } from "../store/live-state-store.js";
import type { Resolvers } from "./activation-policy.js";
import type { AgentRegistry } from "./agent-registry.js";
import type { Dismissals } from "./dismissals.js";
import type { ForkCopies } from "./fork-copies.js";
import type { LiveRegistry } from "./live/live-registry.js";
import type { NotificationHub } from "./notifications.js";
import type { Principal } from "./principal.js";
import type { TurnAttachmentBudget } from "./turn-attachment-budget.js";
import type { TurnRunner } from "./turn-runner.js";

/** What method handlers share. Agents are reached only through the `Resolvers` a handler is given. */
export interface HostContext {
  readonly store: HostStore;
  readonly agent: AgentDriver;
  readonly live: LiveRegistry;
  readonly agents: AgentRegistry;
  readonly runner: TurnRunner;
  readonly notifications: NotificationHub;
  readonly dismissals: Dismissals;
  readonly logger: Logger;
  readonly now: () => number;
  readonly limits: {
    readonly queue: QueueLimits;
    /** Live sessions one (non-admin) principal may hold. */
    readonly sessionsPerPrincipal: number;
    /** Bytes one (non-admin) principal may store: its sessions' event data and its attachments. */
    readonly storedBytesPerPrincipal: number;
    /** Stored event data one read of a whole log holds: `turn.history()`, a fork's prefix. */
    readonly transcriptBytes: number;
  };
  /** Forks' copies, one at a time, and how many each principal may have under way. */
  readonly forks: ForkCopies;
  /** The attachment bytes each principal's running turns hold, and the most they may. */
  readonly attachmentBudget: TurnAttachmentBudget;
  /** Prompts being answered, keyed by session and clientMessageId (in-flight dedupe). */
  readonly prompts: Map<string, Promise<ResultOf<"session.prompt">>>;
}

/** A §4 call's work; `signal` fires when its caller is gone (see `HostApi.call`). */
export type MethodHandler<M extends CallMethod> = (
  ctx: HostContext,
  resolvers: Resolvers,
  principal: Principal,
  params: ParamsOf<M>,
  signal?: AbortSignal,
) => Promise<ResultOf<M>>;

export type HandlerTable = { [M in CallMethod]: MethodHandler<M> };
