import type { Resolution, SessionHeader } from "../../protocol/index.js";
import { type Activation, SessionmuxError } from "../../protocol/index.js";
import { sameResolution } from "../store/first-answer.js";
import type { HostStore } from "../store/live-state-store.js";
import type { AgentRegistry } from "./agent-registry.js";
import { assertAnswerFits } from "./answer-fit.js";
import type { LiveSession } from "./live-session.js";
import { canSee, type Principal } from "./principal.js";
import {
  agentNotLive,
  interactionAlreadyResolved,
  interactionNotFound,
  notFound,
  refusal,
} from "./store-outcomes.js";

/** What a cold inspection learns: enough to authorise and to attach an agent later. */
export interface ColdSession {
  header: SessionHeader;
  headSeq: number;
}

/**
 * The three resolvers of §4. A handler receives only the resolvers its activation permits, so a
 * `cold` method cannot start an agent even by mistake: the other resolvers throw.
 */
export interface Resolvers {
  /** Cold inspection: reads persistence, never touches agents. */
  inspect(principal: Principal, sessionId: string): Promise<ColdSession>;
  /** Live-only lookup: the live session, or `agent_not_live`; never starts one. */
  live(principal: Principal, sessionId: string): Promise<LiveSession>;
  /**
   * As `live`, but a session held by a turn a previous process left parked on a person (a durable
   * pending item, §9) counts too: its agent is attached (through `claim`, as for `resume`) so the
   * call can close that turn. Any other session without an agent is `agent_not_live`.
   */
  liveOrParked(principal: Principal, sessionId: string): Promise<LiveSession>;
  /** Resume-permitted resolution: the live session, attaching an agent when cold. */
  resume(principal: Principal, sessionId: string): Promise<LiveSession>;
  /**
   * An interaction `response` may still answer: unknown, foreign or withdrawn →
   * `interaction_not_found`; `response` of the other kind → `bad_request`; answered already with
   * another answer → `interaction_already_resolved`. All read before anything is resumed, so a
   * refused answer starts no agent.
   */
  interaction(principal: Principal, interactionId: string, response: Resolution): Promise<LiveInteraction>;
}

export interface LiveInteraction {
  interactionId: string;
  sessionId: string;
  /** Answered already with this very answer: the call repeats one the store accepted. */
  repeat: boolean;
}

/**
 * Told of every session a `resume` call acted on for a principal (a dismissed one is restored),
 * once the call succeeded and before it answers: the call's reply waits for it, and its failure
 * is the call's.
 */
export type WorkNotice = (principal: Principal, sessionId: string) => Promise<void> | void;

/** Makes this host the session's owner, then runs `attach` (see `HostCluster.claim`). */
export type Claim = <T>(sessionId: string, attach: () => T) => Promise<T>;

export class ActivationPolicy {
  readonly #store: HostStore;
  readonly #agents: AgentRegistry;
  readonly #claim: Claim;
  readonly #scopes: Record<Activation, Resolvers>;
  readonly #onWork: WorkNotice;

  /**
   * `claim` makes this host the session's owner (the resume rule: on a shared store, its lease),
   * or throws `NotOwner`, and attaches a cold session's agent; `onWork` hears of every session a
   * `resume` call run by `run` acted on, once the call succeeded and before `run` returns.
   */
  constructor(
    store: HostStore,
    agents: AgentRegistry,
    hooks: {
      claim?: Claim;
      onWork?: WorkNotice;
    } = {},
  ) {
    const claim = hooks.claim ?? (async (_sessionId, attach) => attach());
    this.#store = store;
    this.#agents = agents;
    this.#claim = claim;
    this.#onWork = hooks.onWork ?? (() => undefined);
    const inspect = this.inspect.bind(this);
    const live = this.lookupLive.bind(this);
    const resume = this.resolveForWork.bind(this);
    const interaction = this.lookupInteraction.bind(this);
    const liveOrParked = this.lookupLiveOrParked.bind(this);
    const coldOnly = (a: Activation) => ({
      inspect,
      live: forbidden(a, "live"),
      liveOrParked: forbidden(a, "liveOrParked"),
      resume: forbidden(a, "resume"),
      interaction: forbidden(a, "interaction"),
    });
    this.#scopes = {
      cold: coldOnly("cold"),
      explicit: coldOnly("explicit"),
      "live-only": { inspect, live, liveOrParked, interaction, resume: forbidden("live-only", "resume") },
      resume: { inspect, live, liveOrParked, interaction, resume },
    };
  }

  /** The resolvers a method of this activation may use; a `resume` call's work is told only by `run`. */
  scope(activation: Activation): Resolvers {
    return this.#scopes[activation];
  }

  /**
   * Runs one call with the resolvers its activation permits. The sessions a `resume` call
   * resolved reach `onWork` only once the call succeeded: a call that ends in an error (bad
   * input, a store's refusal, a lost race) leaves a dismissal as it was. The result is handed
   * back only once `onWork` is done, so a caller that has it lists a restored session; should
   * `onWork` fail, the call fails with its error, though its work stays done. Nor does it leave an
   * agent it attached: the store refuses some calls only at their write (the owner's queued bytes
   * filled by a concurrent prompt, the session deleted after it was resolved), after the agent
   * attached, and that agent goes again unless another call resolved it meanwhile or it has work.
   */
  run<T>(activation: Activation, call: (resolvers: Resolvers) => Promise<T>): Promise<T> {
    // not an async function of its own for the others: every cold call (a rename) would pay for
    // a promise more and the microtasks of handing one promise to another
    if (activation !== "resume") return call(this.#scopes[activation]);
    return this.#runResume(call);
  }

  async #runResume<T>(call: (resolvers: Resolvers) => Promise<T>): Promise<T> {
    const scope = this.#scopes.resume;
    const worked: [Principal, string][] = [];
    const held: LiveSession[] = [];
    let result: T;
    try {
      result = await call({
        ...scope,
        interaction: async (principal, interactionId, response) => {
          const found = await scope.interaction(principal, interactionId, response);
          worked.push([principal, found.sessionId]);
          return found;
        },
        resume: async (principal, sessionId) => {
          const session = await this.#resolveForWork(principal, sessionId, held);
          worked.push([principal, sessionId]);
          return session;
        },
      });
    } catch (err) {
      this.#release(held, false);
      throw err;
    }
    this.#release(held, true);
    const told = new Set<string>();
    for (const [principal, sessionId] of worked) {
      // `session.respond` to a parked turn resolves its session twice: the interaction, the resume
      const key = `${principal.name}\u0000${sessionId}`;
      if (told.has(key)) continue;
      told.add(key);
      await this.#onWork(principal, sessionId);
    }
    return result;
  }

  /**
   * A call that resolved `held` ended. A success proves the agent was asked for work; an agent
   * attached for calls that were all refused is detached once the last of them ended.
   */
  #release(held: LiveSession[], succeeded: boolean): void {
    for (const session of held) {
      session.calls--;
      if (succeeded) session.attachedForCalls = false;
      else if (session.calls === 0 && session.attachedForCalls) {
        session.attachedForCalls = false;
        this.#agents.detachUnused(session);
      }
    }
  }

  async inspect(principal: Principal, sessionId: string): Promise<ColdSession> {
    const outcome = await this.#store.header(sessionId);
    if (outcome.status !== "ok") throw refusal(sessionId, outcome);
    if (!canSee(principal, outcome.header.owner)) throw notFound(sessionId);
    return { header: outcome.header, headSeq: outcome.headSeq };
  }

  async lookupLive(principal: Principal, sessionId: string): Promise<LiveSession> {
    const session = this.#agents.get(sessionId);
    if (session) {
      if (!canSee(principal, session.owner)) throw notFound(sessionId);
      return session;
    }
    // a missing or foreign session must answer `session_not_found`, not reveal liveness
    await this.inspect(principal, sessionId);
    throw agentNotLive(sessionId);
  }

  async lookupLiveOrParked(principal: Principal, sessionId: string): Promise<LiveSession> {
    const session = this.#agents.get(sessionId);
    if (session) {
      if (!canSee(principal, session.owner)) throw notFound(sessionId);
      return session;
    }
    const cold = await this.inspect(principal, sessionId);
    if (!this.#agents.hasParkedTurn(sessionId)) throw agentNotLive(sessionId);
    // attached after the awaits, get-or-create: a concurrent call may have attached meanwhile
    return this.#claim(sessionId, () =>
      this.#agents.attach(sessionId, { owner: cold.header.owner, model: cold.header.model }),
    );
  }

  async lookupInteraction(
    principal: Principal,
    interactionId: string,
    response: Resolution,
  ): Promise<LiveInteraction> {
    const stored = await this.#store.interaction(interactionId);
    // withdrawn: its turn ended unanswered, and the store refuses an answer to it as to a missing one
    if (!stored || stored.state === "withdrawn" || !canSee(principal, stored.owner))
      throw interactionNotFound(interactionId);
    assertAnswerFits(stored.interaction.kind, interactionId, response);
    const winner = stored.state === "resolved" ? stored.resolution : undefined;
    if (winner && !sameResolution(winner, response)) throw interactionAlreadyResolved(interactionId, winner);
    return { interactionId, sessionId: stored.interaction.sessionId, repeat: winner !== undefined };
  }

  resolveForWork(principal: Principal, sessionId: string): Promise<LiveSession> {
    return this.#resolveForWork(principal, sessionId);
  }

  /**
   * The live session, held for the call in `held` (by `run`) from the moment it is resolved:
   * counted in the same step as the attach, so no refused call can detach it before this call's
   * work begins.
   */
  async #resolveForWork(principal: Principal, sessionId: string, held?: LiveSession[]): Promise<LiveSession> {
    const hold = (session: LiveSession, attached: boolean): LiveSession => {
      if (!held) return session;
      session.calls++;
      if (attached) session.attachedForCalls = true;
      held.push(session);
      return session;
    };
    const existing = this.#agents.get(sessionId);
    if (existing) {
      if (!canSee(principal, existing.owner)) throw notFound(sessionId);
      return hold(this.#agents.attach(sessionId, existing), false);
    }
    const cold = await this.inspect(principal, sessionId);
    // get-or-create after the awaits: a concurrent resume may have attached meanwhile
    return this.#claim(sessionId, () => {
      const attached = this.#agents.get(sessionId) === undefined;
      const session = this.#agents.attach(sessionId, { owner: cold.header.owner, model: cold.header.model });
      return hold(session, attached);
    });
  }
}

function forbidden(activation: Activation, resolver: string) {
  return (): never => {
    throw new SessionmuxError(
      "internal_error",
      `a ${activation} method may not use the ${resolver} resolver`,
    );
  };
}
