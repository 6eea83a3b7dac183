import { randomUUID } from "node:crypto";
import { type Logger, pino } from "pino";
import {
  ActivationTable,
  type CallMethod,
  isMethodName,
  Methods,
  type Notification,
  type ParamsOf,
  paramsValidator,
  type ResultOf,
  SessionmuxError,
} from "../../protocol/index.js";
import { Limits } from "../../protocol/limits.js";
import type { AgentDriver } from "../agents/agent.js";
import type { HostStore } from "../store/live-state-store.js";
import type { AttachmentBody } from "../store/session-store.js";
import { ActivationPolicy } from "./activation-policy.js";
import { AgentRegistry } from "./agent-registry.js";
import { ControlFeed } from "./control-feed.js";
import { Dismissals } from "./dismissals.js";
import { DEFAULT_MAX_FORKS_PER_PRINCIPAL, ForkCopies } from "./fork-copies.js";
import type { AttachmentMethod, HostApi } from "./host-api.js";
import { type ClusterOptions, HostCluster } from "./host-cluster.js";
import type { HostContext } from "./host-context.js";
import { type HostLeases, type Ownership, SoleOwnership } from "./host-leases.js";
import type { HostMeters } from "./host-meters.js";
import { watchListChanges } from "./list-notifier.js";
import { type LiveCounts, LiveRegistry } from "./live/live-registry.js";
import type { Baseline, ControlDelta, LiveState } from "./live/live-state.js";
import { HANDLERS } from "./method-handlers/handler-table.js";
import { openAttachment } from "./method-handlers/read-handlers.js";
import { NotOwner } from "./not-owner.js";
import { NotificationHub } from "./notifications.js";
import type { Principal } from "./principal.js";
import { SessionReadHandle, visibleAttachment } from "./session-read-handle.js";
import { assertStorageRoom, storageUsage } from "./storage-quota.js";
import { DEFAULT_STORE_RETRY } from "./store-retry.js";
import { TurnAttachmentBudget } from "./turn-attachment-budget.js";
import { TurnRunner } from "./turn-runner.js";

/** Queued prompts one session may hold. */
export const DEFAULT_MAX_QUEUED_PER_SESSION = 100;
/** Live agents one principal may hold at once. */
export const DEFAULT_MAX_LIVE_AGENTS_PER_PRINCIPAL = 1000;
/** Bytes of queued prompts (text, display, inline attachments) one principal may hold. */
export const DEFAULT_MAX_QUEUED_BYTES_PER_PRINCIPAL = 16 * 1024 * 1024;
/** How long a stopped turn waits for its agent to return before it is closed without it. */
export const DEFAULT_TURN_STOP_GRACE_MS = 5_000;

/** Sessions read per page when live state is restored at start. */
const RESTORE_PAGE = 200;

export interface SessionHostOptions {
  store: HostStore;
  /**
   * Live sessions one principal may hold (admin exempt); past it `session.create` and
   * `session.fork` are refused `too_many_sessions`. @default 10,000
   */
  maxSessionsPerPrincipal?: number;
  /**
   * Bytes one principal may store, its sessions' event data and its attachments (admin exempt);
   * past it a prompt, create, fork, rename, model choice or upload is refused `storage_quota_exceeded`. @default 1 GiB
   */
  maxStoredBytesPerPrincipal?: number;
  /** Past it a prompt is refused `queue_full`. @default 100 */
  maxQueuedPromptsPerSession?: number;
  /** Past it a prompt is refused `queue_full`. @default 16 MiB */
  maxQueuedBytesPerPrincipal?: number;
  /**
   * Live agents one principal may hold; past it idle ones are detached (least recently used
   * first), and with none idle the call is refused `too_many_agents`. @default 1000
   */
  maxLiveAgentsPerPrincipal?: number;
  /**
   * Jobs one session's agent may have running at once; past it `turn.startJob` throws
   * `overloaded` (`data.limit` `running_jobs_per_session`). @default 64
   */
  maxRunningJobsPerSession?: number;
  /**
   * Jobs one principal's agents may have running at once on this host (admin too); past it
   * `turn.startJob` throws `overloaded` (`data.limit` `running_jobs_per_principal`). @default 1,000
   */
  maxRunningJobsPerPrincipal?: number;
  /**
   * Forks one principal may have under way on this host (by name, admin too), copying or waiting
   * for the fork before them (a host copies one fork at a time); past it `session.fork` is refused
   * `overloaded` (`data.limit` `forks_per_principal`). @default 4
   */
  maxForksPerPrincipal?: number;
  /**
   * Stored event data one read of a whole log may hold: an agent's `turn.history()` or a fork of a
   * longer prefix fails `transcript_too_large` (the HTTP transcript views take the same bound from
   * `HttpOptions`).
   * @default 32 MiB (`Limits.transcriptViewBytes`)
   */
  maxTranscriptBytes?: number;
  /**
   * Bytes of attachments one principal's running turns may hold (admin too): a prompt whose own
   * pass it is refused `payload_too_large`; one that would take the principal's past it is refused
   * `overloaded` (retryable) before it is written, or, queued, starts once a turn gave room back.
   * @default 64 MiB (`Limits.turnAttachmentBytesPerPrincipal`)
   */
  maxTurnAttachmentBytes?: number;
  agent: AgentDriver;
  /**
   * How long a cancelled turn (or one stopped by shutdown) waits for its agent to return; past it
   * the turn is closed without the agent, whose later emits are refused.
   * @default 5_000
   */
  turnStopGraceMs?: number;
  /** @default 600_000 (10 minutes) */
  idleDetachMs?: number;
  metrics?: HostMeters;
  logger?: Logger;
  /** @default a random id */
  hostId?: string;
  /** @default Date.now */
  now?: () => number;
  /**
   * Several hosts on one shared store (PostgreSQL): a session's agent runs only on the host
   * holding its lease, calls reaching another host are forwarded to it, and control shows the
   * agents of every host. Absent: this host owns every session (the embedded SQLite store).
   */
  cluster?: ClusterOptions;
}

export type { ClusterOptions };

/**
 * The session controller behind every transport: a thin dispatcher that sends each §4 method
 * through the activation table to its handler, with the resolvers its activation permits.
 */
export class SessionHost implements HostApi {
  readonly hostId: string;
  readonly generation = randomUUID();
  readonly store: HostStore;
  readonly #registry: LiveRegistry;
  readonly #agents: AgentRegistry;
  readonly #policy: ActivationPolicy;
  readonly #hub = new NotificationHub();
  readonly #dismissals: Dismissals;
  readonly #control: ControlFeed;
  readonly #ctx: HostContext;
  readonly #runner: TurnRunner;
  readonly #logger: Logger;
  readonly #now: () => number;
  readonly #cluster: HostCluster | undefined;
  #stopWatching: (() => void) | undefined;
  #stopLive: (() => void) | undefined;
  #closing = false;
  /** `onAnyCommit` listeners told of forwarded `resume` calls' answers (see `CallRouterOptions`). */
  readonly #forwardedCommits = new Set<() => void>();
  #shutdown: Promise<void> | undefined;

  constructor(options: SessionHostOptions) {
    this.store = options.store;
    const store = options.store;
    this.hostId = options.hostId ?? randomUUID();
    this.#logger = (options.logger ?? pino({ enabled: false })).child({ hostId: this.hostId });
    this.#now = options.now ?? Date.now;
    this.#cluster = options.cluster
      ? new HostCluster({
          options: options.cluster,
          hostId: this.hostId,
          store,
          logger: this.#logger,
          agents: () => this.#agents,
          registry: () => this.#registry,
          run: (principal, method, params, signal) => this.#run(principal, method, params, signal),
          resumeUnowned: (sessionId) => this.#resumeUnowned(sessionId),
          closeAbandoned: () => this.#closeAbandoned(),
          closing: () => this.#closing,
          forwardedResume: () => {
            for (const listener of this.#forwardedCommits) {
              // the call's work is done: a listener's fault is logged, never the call's answer
              try {
                listener();
              } catch (err) {
                this.#logger.error({ err }, "a commit listener failed on a forwarded call's answer");
              }
            }
          },
          ...(options.metrics ? { meters: options.metrics } : {}),
        })
      : undefined;
    const ownership: Ownership = this.#cluster?.leases ?? new SoleOwnership();
    this.#registry = new LiveRegistry(
      {
        // job events are the agent's writes too: fenced, and dropped once the lease is gone
        append: async (sessionId, event) => {
          const fence = ownership.fence(sessionId);
          if (!fence) return;
          const outcome = await store.append(sessionId, [event], { at: this.#now(), ...fence });
          if (outcome.status === "fenced" && fence.fence) ownership.fenced(fence.fence);
        },
        progress: async (jobId, progress) => {
          await store.setJobProgress(jobId, progress);
        },
      },
      this.#cluster ? this.hostId : undefined,
      {
        ...(options.maxRunningJobsPerSession !== undefined
          ? { maxRunningPerSession: options.maxRunningJobsPerSession }
          : {}),
        ...(options.maxRunningJobsPerPrincipal !== undefined
          ? { maxRunningPerOwner: options.maxRunningJobsPerPrincipal }
          : {}),
      },
    );
    this.#agents = new AgentRegistry({
      live: this.#registry,
      idleDetachMs: options.idleDetachMs ?? 600_000,
      maxLiveAgentsPerOwner: options.maxLiveAgentsPerPrincipal ?? DEFAULT_MAX_LIVE_AGENTS_PER_PRINCIPAL,
      logger: this.#logger,
      onDetached: (sessionId) => this.#cluster?.detached(sessionId),
      ...(options.metrics ? { metrics: options.metrics } : {}),
    });
    this.#dismissals = new Dismissals(this.store, this.#registry, this.#hub, this.#now, this.#logger);
    this.#policy = new ActivationPolicy(this.store, this.#agents, {
      claim: (sessionId, attach) => this.#claim(sessionId, attach),
      onWork: (principal, sessionId) => this.#dismissals.restoreForWork(principal, sessionId),
    });
    this.#control = new ControlFeed(
      this.store,
      this.#registry,
      options.cluster?.generation ?? this.generation,
    );
    const transcriptBytes = options.maxTranscriptBytes ?? Limits.transcriptViewBytes;
    const attachmentBudget = new TurnAttachmentBudget(
      options.maxTurnAttachmentBytes ?? Limits.turnAttachmentBytesPerPrincipal,
    );
    this.#runner = new TurnRunner({
      store: this.store,
      agent: options.agent,
      live: this.#registry,
      agents: this.#agents,
      ownership,
      notifications: this.#hub,
      logger: this.#logger,
      now: this.#now,
      closing: () => this.#closing,
      maxHistoryBytes: transcriptBytes,
      attachmentBudget,
      stopGraceMs: options.turnStopGraceMs ?? DEFAULT_TURN_STOP_GRACE_MS,
      storeRetry: DEFAULT_STORE_RETRY,
    });
    this.#ctx = {
      store: this.store,
      agent: options.agent,
      live: this.#registry,
      agents: this.#agents,
      runner: this.#runner,
      notifications: this.#hub,
      dismissals: this.#dismissals,
      logger: this.#logger,
      now: this.#now,
      limits: {
        queue: {
          maxItemsPerSession: options.maxQueuedPromptsPerSession ?? DEFAULT_MAX_QUEUED_PER_SESSION,
          maxBytesPerOwner: options.maxQueuedBytesPerPrincipal ?? DEFAULT_MAX_QUEUED_BYTES_PER_PRINCIPAL,
        },
        sessionsPerPrincipal: options.maxSessionsPerPrincipal ?? Limits.sessionsPerPrincipal,
        storedBytesPerPrincipal: options.maxStoredBytesPerPrincipal ?? Limits.storedBytesPerPrincipal,
        transcriptBytes,
      },
      prompts: new Map(),
      forks: new ForkCopies(options.maxForksPerPrincipal ?? DEFAULT_MAX_FORKS_PER_PRINCIPAL),
      attachmentBudget,
    };
  }

  /** This host's session leases on a shared store; undefined when it owns every session. */
  get leases(): HostLeases | undefined {
    return this.#cluster?.leases;
  }

  /** The live registry, read-only: queues, interactions, jobs and agent status. */
  get live(): LiveState {
    return this.#registry;
  }

  /**
   * Closes turns a previous process left running (not those parked on a person), takes over the
   * durable live state, then restores it: sessions with queued prompts get their agent back and
   * their next prompt started; parked sessions stay parked until answered.
   */
  async start(): Promise<void> {
    // on a shared store, sessions whose lease another live host holds are left alone
    const interrupted = await this.store.interruptOpenTurns(
      this.#now(),
      this.#cluster ? { hostId: this.hostId } : undefined,
    );
    if (interrupted.length > 0)
      this.#logger.info({ sessions: interrupted.length }, "closed open turns as interrupted");
    this.#stopLive = this.store.subscribeLive((notice) => {
      this.#cluster?.noticed(notice);
      this.#registry.apply(notice);
    });
    await this.#cluster?.start();
    this.#control.start();
    this.#dismissals.start();
    this.#stopWatching = watchListChanges(this.store, this.#registry, this.#hub, this.#now);
    await this.#restore();
    this.#cluster?.serve();
  }

  /** Page by page, yielding between pages, so a large restore never holds the event loop long. */
  async #restore(): Promise<void> {
    let restored = 0;
    let after: string | null = null;
    do {
      const page = await this.store.liveStatePage(after, RESTORE_PAGE);
      this.#registry.load(page.sessions);
      for (const s of page.sessions) {
        // a parked session stays cold until answered; its queue waits behind the parked turn
        if (s.queue.length === 0 || s.parkedTurnId !== null || this.#closing) continue;
        if (await this.#resumeQueue(s.sessionId, s)) restored++;
      }
      after = page.next;
      if (after !== null) await new Promise<void>((resolve) => setImmediate(resolve));
    } while (after !== null);
    if (restored > 0) this.#logger.info({ sessions: restored }, "restored queued prompts");
  }

  /** Attaches a session's agent here, on a shared store once this host holds its lease (see `HostCluster.claim`). */
  async #claim<T>(sessionId: string, attach: () => T): Promise<T> {
    return this.#cluster ? this.#cluster.claim(sessionId, attach) : attach();
  }

  /**
   * Takes the session (its lease, on a shared store) and starts its next queued prompt; false
   * when a live host owns it, or when it cannot run here now (its queue stays in the store).
   */
  async #resumeQueue(
    sessionId: string,
    info: { owner: string; model: string },
    refusedLevel: "warn" | "debug" = "warn",
  ): Promise<boolean> {
    try {
      this.#runner.kick(await this.#claim(sessionId, () => this.#agents.attach(sessionId, info)));
      return true;
    } catch (err) {
      // a live host owns it and runs its queue
      if (err instanceof NotOwner) return false;
      // over the owner's agent limit: the queue stays in the store; the next prompt resumes it
      this.#logger[refusedLevel]({ err, sessionId }, "queued prompts not restored");
      return false;
    }
  }

  /** The cluster's sweep found queued prompts nobody runs (their owner died): run them here. */
  async #resumeUnowned(sessionId: string): Promise<void> {
    if (this.#closing || this.#agents.get(sessionId)) return;
    const projection = await this.store.projection(sessionId);
    // refused (the owner's agent limit): tried again every sweep, so not logged as a warning each time
    if (!projection || !(await this.#resumeQueue(sessionId, projection, "debug"))) return;
    this.#logger.info({ sessionId }, "took over queued prompts whose owner is gone");
  }

  /**
   * The cluster's sweep: a turn (or job) left running by an owner that died or paused past its
   * lease, with nothing queued and no call for the session, would otherwise show as running, its
   * followers waiting, until someone wrote to it. Every unexpired lease is spared (this host's
   * own too), so only work no host runs any more is closed, as a restart closes it.
   */
  async #closeAbandoned(): Promise<void> {
    if (this.#closing) return;
    const closed = await this.store.interruptOpenTurns(this.#now());
    if (closed.length > 0)
      this.#logger.info(
        { sessions: closed.length, sessionIds: closed.slice(0, 20) },
        "closed running turns whose owner is gone as interrupted",
      );
  }

  /**
   * Not an async function: the promise it answers is the router's or the handler's own, not one
   * more wrapped around it (and the microtasks of handing one to the other) on every call. Every
   * refusal, those thrown before the handler runs included, is a rejected promise.
   */
  call<M extends CallMethod>(
    principal: Principal,
    method: M,
    params: ParamsOf<M>,
    signal?: AbortSignal,
  ): Promise<ResultOf<M>> {
    try {
      this.#refuseWhileClosing();
      if (!isMethodName(method) || Methods[method].kind !== "call") {
        throw new SessionmuxError("unknown_method", `unknown method ${String(method)}`);
      }
      const parsed = paramsValidator(method).parse(params) as ParamsOf<M>;
      const answer = this.#cluster
        ? this.#cluster.router.call(principal, method, parsed, signal)
        : this.#run(principal, method, parsed, signal);
      return answer as Promise<ResultOf<M>>;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Runs a parsed call on this host, through its activation policy and handlers. */
  #run(principal: Principal, method: CallMethod, params: unknown, signal?: AbortSignal): Promise<unknown> {
    const handler = HANDLERS[method] as (...args: unknown[]) => Promise<unknown>;
    return this.#policy.run(ActivationTable[method], (resolvers) =>
      handler(this.#ctx, resolvers, principal, params, signal),
    );
  }

  async authorizeRead(principal: Principal, sessionId: string): Promise<void> {
    await this.#policy.inspect(principal, sessionId);
  }

  async openRead(principal: Principal, sessionId: string): Promise<SessionReadHandle> {
    return new SessionReadHandle(this.store, sessionId, await this.#policy.inspect(principal, sessionId));
  }

  async openAttachment(
    principal: Principal,
    method: AttachmentMethod,
    params: ParamsOf<"session.attachment">,
  ): Promise<AttachmentBody> {
    this.#refuseWhileClosing();
    const parsed = paramsValidator("session.attachment").parse(params);
    return openAttachment(this.store, this.#policy.scope(ActivationTable[method]), principal, parsed);
  }

  #refuseWhileClosing(): void {
    if (this.#closing) {
      throw new SessionmuxError("host_shutting_down", "the host is shutting down; reconnect shortly");
    }
  }

  readAttachment(principal: Principal, attachmentId: string): Promise<AttachmentBody | null> {
    return visibleAttachment(this.store, principal, attachmentId);
  }

  storageUsage(principal: Principal): Promise<{ storedBytes: number; maxBytes: number | null }> {
    return storageUsage(this.#ctx, principal);
  }

  async putAttachment(
    principal: Principal,
    input: { name: string; type: string; bytes: Uint8Array },
  ): Promise<string> {
    await assertStorageRoom(this.#ctx, principal);
    return this.store.putAttachment({ owner: principal.name, ...input });
  }

  onAnyCommit(listener: () => void): () => void {
    // a dismissal or restore is a commit notice too (`meta`, marked `dismissal`), on both stores
    const stop = this.store.subscribeAll(() => listener());
    // and so is a forwarded `resume` call's answer: its owner may have restored the session
    // before answering, and this host's commit feed may hear that after the answer went out
    const heard = () => listener();
    this.#forwardedCommits.add(heard);
    return () => {
      stop();
      this.#forwardedCommits.delete(heard);
    };
  }

  subscribeControl(principal: Principal, listener: (delta: ControlDelta) => void): () => void {
    return this.#control.subscribe(principal, listener);
  }

  /** The live state in view now, counted: what `/metrics` serves (every host sharing a store sees it all). */
  liveCounts(): LiveCounts {
    return this.#registry.counts();
  }

  controlBaseline(principal: Principal): Promise<Baseline> {
    return this.#control.baseline(principal);
  }

  subscribeNotifications(principal: Principal, listener: (notification: Notification) => void): () => void {
    return this.#hub.subscribe(principal, listener);
  }

  subscribeNotificationLists(
    principal: Principal,
    listener: (list: readonly Notification[]) => void,
  ): () => void {
    return this.#hub.subscribeLists(principal, listener);
  }

  /** The attachment bytes the principal's running turns hold of their bound (`maxTurnAttachmentBytes`). */
  heldAttachmentBytes(owner: string): number {
    return this.#ctx.attachmentBudget.heldBy(owner);
  }

  /** Stops accepting work, closes running turns as interrupted, detaches every agent. */
  shutdown(): Promise<void> {
    this.#shutdown ??= this.#stop();
    return this.#shutdown;
  }

  async #stop(): Promise<void> {
    this.#closing = true;
    this.#runner.stop();
    this.#cluster?.stopServing();
    this.#agents.close();
    // a parked turn of a previous process runs no agent: there is nothing to stop or wait for
    const turns = this.#agents.all().flatMap((s) => (s.turn && !s.turn.parked ? [s.turn] : []));
    for (const turn of turns) turn.stop("shutdown");
    await Promise.all(turns.map((t) => t.done));
    // jobs still running end `interrupted`, recorded before the store closes
    for (const session of this.#agents.all()) this.#agents.detach(session.sessionId, "interrupted");
    await this.#registry.jobRegistry.settled();
    // another host may take these sessions at once
    await this.#cluster?.stop();
    this.#stopWatching?.();
    this.#stopLive?.();
    this.#dismissals.stop();
    this.#control.stop();
    this.#hub.clear();
    await this.#ctx.agent.close?.();
  }
}
