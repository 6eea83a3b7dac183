import type { Logger } from "pino";
import type { CallInbox } from "../store/call-inbox.js";
import { CountsByKey } from "../store/counts-by-key.js";
import type { HostStore, LiveStateNotice } from "../store/live-state-store.js";
import type { SessionLease, SessionLeaseStore } from "../store/session-lease.js";
import type { AgentRegistry } from "./agent-registry.js";
import { CallRouter, type LocalRun } from "./call-router.js";
import { HostLeases } from "./host-leases.js";
import type { ClusterMeters } from "./host-meters.js";
import type { LiveRegistry } from "./live/live-registry.js";
import { NotOwner } from "./not-owner.js";
import type { Principal } from "./principal.js";
import { refusal } from "./store-outcomes.js";

/** Leases read per page when other hosts' agents are loaded at start. */
const LEASE_PAGE = 200;
/** Sessions the sweep takes over per round at most; the next round takes the rest. */
const SWEEP_LIMIT = 100;

export interface ClusterOptions {
  /** The leases of the shared store. @default the store itself */
  leases?: SessionLeaseStore;
  /** Where calls for sessions another host owns are sent, and this host's are served from. */
  inbox: CallInbox;
  /** A lease lives this long unless renewed (every third of it). @default 10_000 */
  leaseTtlMs?: number;
  /** A forwarded call waits this long before the owner is resolved again. @default 5_000 */
  forwardTimeoutMs?: number;
  /**
   * The control baseline's `generation` on every host of the shared store: live state is the
   * store's there, so a client whose socket moves to another host (or finds this one restarted)
   * sees the same state, not a restart. @default this host's own generation
   */
  generation?: string;
}

export interface HostClusterDeps {
  options: ClusterOptions;
  hostId: string;
  store: HostStore;
  logger: Logger;
  /** Bound late: the agent registry needs the cluster's detach hook first. */
  agents: () => AgentRegistry;
  registry: () => LiveRegistry;
  run: LocalRun;
  /** Runs the queued prompts of a session nobody owns here (takes its lease first). */
  resumeUnowned: (sessionId: string) => Promise<void>;
  /** Closes, as interrupted, running turns and jobs of sessions whose lease no host holds any more. */
  closeAbandoned: () => Promise<void>;
  closing: () => boolean;
  /** See `CallRouterOptions.forwardedResume`. */
  forwardedResume?: (principal: Principal) => void;
  meters?: ClusterMeters;
}

/**
 * One host's part in a cluster of hosts sharing a store: the leases of the sessions whose agents
 * it runs (taken on resume, released on detach, lost → agent stopped), the router that sends other
 * sessions' calls to their owners and serves the calls sent here, and other hosts' agents in view.
 */
export class HostCluster {
  readonly leases: HostLeases;
  readonly router: CallRouter;
  readonly #deps: HostClusterDeps;
  readonly #leaseStore: SessionLeaseStore;
  #stopServing: (() => void) | undefined;
  #stopCommits: (() => void) | undefined;
  /** Sessions whose agent is being attached here (see `claim`), with how many claims are under way. */
  readonly #claiming = new CountsByKey();

  constructor(deps: HostClusterDeps) {
    this.#deps = deps;
    const leaseStore = deps.options.leases ?? deps.store;
    this.#leaseStore = leaseStore;
    this.leases = new HostLeases({
      store: leaseStore,
      hostId: deps.hostId,
      logger: deps.logger,
      onLost: (lease) => this.#lost(lease),
      sweep: () => this.#sweep(),
      ...(deps.meters ? { meters: deps.meters } : {}),
      ...(deps.options.leaseTtlMs !== undefined ? { ttlMs: deps.options.leaseTtlMs } : {}),
    });
    this.router = new CallRouter({
      hostId: deps.hostId,
      store: deps.store,
      leaseStore,
      leases: this.leases,
      inbox: deps.options.inbox,
      run: deps.run,
      logger: deps.logger,
      closing: deps.closing,
      ...(deps.forwardedResume ? { forwardedResume: deps.forwardedResume } : {}),
      ...(deps.meters ? { meters: deps.meters } : {}),
      ...(deps.options.forwardTimeoutMs !== undefined
        ? { forwardTimeoutMs: deps.options.forwardTimeoutMs }
        : {}),
    });
  }

  /** Before live state is restored: other hosts' agents in view, and the renewal clock running. */
  async start(): Promise<void> {
    const registry = this.#deps.registry();
    this.#stopCommits = this.#deps.store.subscribeAll((sessionId, notice) => {
      if (notice.kind === "append") registry.committed(sessionId, notice.events);
    });
    await this.#loadRemoteAgents();
    this.leases.start();
  }

  /** After restore: calls forwarded to this host are served (also those recorded while it was away). */
  serve(): void {
    this.#stopServing = this.#deps.options.inbox.serve(this.#deps.hostId, (call) => this.router.serve(call));
  }

  /**
   * Stops serving forwarded calls: they wait unclaimed, and their senders take them back and route
   * them again once this host's leases are released (`stop`) or end, else at their forward wait.
   */
  stopServing(): void {
    this.#stopServing?.();
  }

  /** After the agents stopped: the leases go, so another host may take the sessions at once. */
  async stop(): Promise<void> {
    await this.leases.releaseAll();
    this.#stopCommits?.();
  }

  /**
   * Makes this host the owner of a cold session and attaches its agent (`attach`): takes the
   * session's lease (free or expired) first, or throws `NotOwner` naming the live holder. From the
   * call until `attach` returned, the lease is not given up for an earlier agent's detach: a
   * release waiting behind the take would otherwise find no agent yet and let the lease go under
   * the agent about to attach, whose first append would then be refused. If `attach` throws, the
   * lease goes as a detached agent's does.
   */
  async claim<T>(sessionId: string, attach: () => T): Promise<T> {
    this.#claiming.add(sessionId);
    try {
      await this.#own(sessionId);
      try {
        return attach();
      } catch (err) {
        this.detached(sessionId);
        throw err;
      }
    } finally {
      this.#claiming.add(sessionId, -1);
    }
  }

  /** A detached agent's lease goes once its last job writes settled, unless an agent attached again or is attaching. */
  detached(sessionId: string): void {
    if (this.#deps.closing()) return;
    const agents = this.#deps.agents();
    // asked again as the release runs: it may wait behind another operation on the lease
    const kept = () => agents.get(sessionId) !== undefined || this.#claiming.has(sessionId);
    void this.#deps
      .registry()
      .jobRegistry.settled()
      .then(() => this.leases.release(sessionId, kept));
  }

  /**
   * Another host taking a lease this host holds means this host lost it (before the renewal says
   * so). Any take or release moves the calls forwarded for the session that wait on its owner.
   */
  noticed(notice: LiveStateNotice): void {
    if (notice.kind !== "lease") return;
    this.router.leaseChanged(notice.sessionId);
    if (notice.hostId === this.#deps.hostId) return;
    const held = this.leases.lease(notice.sessionId);
    if (held && notice.generation > held.generation) this.leases.fenced(held);
  }

  /** This host holds the session's lease (kept, or taken now), or `NotOwner` names the live holder. */
  async #own(sessionId: string): Promise<void> {
    if (this.leases.lease(sessionId)) return;
    const outcome = await this.leases.acquire(sessionId);
    if (outcome.status === "acquired") return;
    if (outcome.status === "held") throw new NotOwner(sessionId, outcome.holder.hostId);
    throw refusal(sessionId, outcome);
  }

  /**
   * After every lease round: the view of other hosts' agents is set right from their leases, and
   * queued prompts of sessions whose lease nobody holds (the owner died, or paused past its
   * lease), which would otherwise wait for the next call to that session, are taken over through
   * the normal lease path; the lease decides which host wins. Then the turns and jobs such an
   * owner left running with nothing queued are closed `interrupted`.
   */
  async #sweep(): Promise<void> {
    if (this.#deps.closing()) return;
    await this.#loadRemoteAgents();
    for (const sessionId of await this.#leaseStore.unownedQueues(SWEEP_LIMIT)) {
      if (this.#deps.closing()) return;
      await this.#deps.resumeUnowned(sessionId);
    }
    if (this.#deps.closing()) return;
    await this.#deps.closeAbandoned();
  }

  /**
   * This host lost the session's lease: its agent stops at once and writes nothing more, and the
   * calls of the session forwarded here that wait for their turn are refused, to be routed again.
   */
  #lost(lease: SessionLease): void {
    this.#deps.options.inbox.leaseLost?.(this.#deps.hostId, lease.sessionId);
    const agents = this.#deps.agents();
    const session = agents.get(lease.sessionId);
    if (!session) return;
    session.turn?.stop("lost");
    agents.detach(lease.sessionId, "interrupted");
  }

  /**
   * Agents other hosts run, as their leases show them: read at start, and again after every lease
   * round, since a lease can end with no notice (its host died and nobody took the session; a
   * notice missed while this host's LISTEN connection was down): an agent shown on another host
   * whose lease ended goes from the view, one shown on the wrong host moves, and one missing comes.
   */
  async #loadRemoteAgents(): Promise<void> {
    const { store } = this.#deps;
    const registry = this.#deps.registry();
    const shown = registry.remoteHosts();
    const held = new Map<string, string>();
    let after: string | null = null;
    do {
      const page = await store.leasePage(after, LEASE_PAGE);
      for (const lease of page.leases) {
        held.set(lease.sessionId, lease.hostId);
        // the registry leaves out this host's own sessions and those already in view
        registry.loadRemote(lease.sessionId, lease.owner, lease.hostId);
      }
      after = page.next;
    } while (after !== null);
    // the registry moves only what the leases show elsewhere
    for (const [sessionId, shownOn] of shown)
      registry.remoteLeaseRead(sessionId, shownOn, held.get(sessionId) ?? null);
  }
}
