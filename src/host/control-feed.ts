import type { HostStore } from "../store/live-state-store.js";
import type { LiveRegistry } from "./live/live-registry.js";
import type { Baseline, ControlDelta } from "./live/live-state.js";
import { nextLoopTurn } from "./loop-turns.js";
import { canSee, type Principal } from "./principal.js";
import { toRow } from "./session-row.js";
import { SubscribersByOwner } from "./subscribers-by-owner.js";

type Listener = (delta: ControlDelta) => void;

/**
 * Projections read (and turned into rows) in one turn of the event loop while a baseline is built:
 * about a millisecond or two of work.
 */
const BASELINE_BATCH = 64;

/**
 * §5 `session.control`: live-state deltas (queues and interactions from the store's live-state
 * notices, agents and jobs from this process) plus projection deltas from the store's commits,
 * each filtered to what a principal may see. The transport subscribes first, then asks for a
 * baseline, so nothing that changes while the baseline is built is lost.
 */
export class ControlFeed {
  /** By owner: a change looks only at the listeners that may see it. */
  readonly #subscribers = new SubscribersByOwner<{ readonly listener: Listener }>();
  readonly #store: HostStore;
  readonly #live: LiveRegistry;
  readonly #generation: string;
  #unsubscribe: (() => void)[] = [];

  constructor(store: HostStore, live: LiveRegistry, generation: string) {
    this.#store = store;
    this.#live = live;
    this.#generation = generation;
  }

  start(): void {
    this.#unsubscribe.push(
      this.#live.subscribeWithOwner((delta, _sessionId, owner) => this.#fanOut(owner, delta)),
      // a delete and a dismissal carry no projection (both stores pass null), so they send no row:
      // a dismissal changed only its principal's lists, which that principal hears of alone
      this.#store.subscribeAll((sessionId, _notice, projection) => {
        if (!projection || this.#subscribers.size === 0) return;
        this.#fanOut(projection.owner, {
          kind: "projection",
          sessionId,
          projection: toRow(projection, this.#live),
        });
      }),
    );
  }

  stop(): void {
    for (const off of this.#unsubscribe) off();
    this.#unsubscribe = [];
    this.#subscribers.clear();
  }

  subscribe(principal: Principal, listener: Listener): () => void {
    // an object of its own: one listener subscribed twice is two subscribers
    return this.#subscribers.add(principal, { listener });
  }

  /**
   * Live state is read in one synchronous cut (agents, jobs, and the durable queues and
   * interactions of every visible session); projections of those sessions follow, read in batches
   * of one event-loop turn each, taken in turn with every other baseline being built (so many at
   * once cannot hold the loop between them), each carrying the seq it reflects.
   */
  async baseline(principal: Principal): Promise<Baseline> {
    const sees = (owner: string | undefined) => owner !== undefined && canSee(principal, owner);
    const agents = this.#live.agents().filter((a) => sees(this.#live.ownerOf(a.sessionId)));
    const queues = this.#live.promptQueue.all().filter((q) => sees(q.owner));
    const interactions = this.#live.interactionRegistry.pending().filter((p) => sees(p.owner));
    const baseline: Baseline = {
      kind: "baseline",
      generation: this.#generation,
      agents,
      queues: queues.map(({ sessionId, items }) => ({ sessionId, items })),
      jobs: this.#live.allJobs().filter((j) => sees(this.#live.ownerOf(j.sessionId))),
      interactions: interactions.map((p) => p.interaction),
      projections: [],
    };
    const sessions = new Set<string>(agents.map((a) => a.sessionId));
    for (const q of queues) sessions.add(q.sessionId);
    for (const p of interactions) sessions.add(p.interaction.sessionId);
    const ids = [...sessions];
    for (let start = 0; start < ids.length; start += BASELINE_BATCH) {
      await nextLoopTurn();
      const batch = await Promise.all(
        ids.slice(start, start + BASELINE_BATCH).map((id) => this.#store.projection(id)),
      );
      for (const projection of batch)
        if (projection) baseline.projections.push(toRow(projection, this.#live));
    }
    return baseline;
  }

  #fanOut(owner: string, delta: ControlDelta): void {
    for (const s of this.#subscribers.seeing(owner)) {
      try {
        s.listener(delta);
      } catch {
        // a faulty subscriber must not stop the others
      }
    }
  }
}
