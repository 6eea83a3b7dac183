import type { SessionStore } from "../store/session-store.js";
import type { LiveRegistry } from "./live/live-registry.js";
import type { Baseline, ControlDelta } from "./live/live-state.js";
import { canSee, type Principal } from "./principal.js";
import { toRow } from "./session-row.js";

interface Subscriber {
  readonly principal: Principal;
  readonly listener: (delta: ControlDelta) => void;
}

/**
 * §5 `session.control`: live-state deltas plus projection deltas from the store's commits, each
 * filtered to what a principal may see. The transport subscribes first, then asks for a baseline,
 * so nothing that changes while the baseline is built is lost.
 */
export class ControlFeed {
  readonly #subscribers = new Set<Subscriber>();
  readonly #store: SessionStore;
  readonly #live: LiveRegistry;
  readonly #generation: string;
  #unsubscribe: (() => void)[] = [];

  constructor(store: SessionStore, live: LiveRegistry, generation: string) {
    this.#store = store;
    this.#live = live;
    this.#generation = generation;
  }

  start(): void {
    this.#unsubscribe.push(
      this.#live.subscribeWithSession((delta, sessionId) => {
        const owner = this.#live.ownerOf(sessionId);
        if (owner !== undefined) this.#fanOut(owner, delta);
      }),
      this.#store.subscribeAll((sessionId, notice, projection) => {
        if (!projection || notice.kind === "delete" || this.#subscribers.size === 0) return;
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

  subscribe(principal: Principal, listener: (delta: ControlDelta) => void): () => void {
    const subscriber = { principal, listener };
    this.#subscribers.add(subscriber);
    return () => this.#subscribers.delete(subscriber);
  }

  /** Live state is read in one synchronous cut; each projection carries the seq it reflects. */
  async baseline(principal: Principal): Promise<Baseline> {
    const visible = (sessionId: string) => {
      const owner = this.#live.ownerOf(sessionId);
      return owner !== undefined && canSee(principal, owner);
    };
    const agents = this.#live.agents().filter((a) => visible(a.sessionId));
    const baseline: Baseline = {
      kind: "baseline",
      generation: this.#generation,
      agents,
      queues: this.#live.queues().filter((q) => visible(q.sessionId)),
      jobs: this.#live.allJobs().filter((j) => visible(j.sessionId)),
      interactions: this.#live.interactions().filter((i) => visible(i.sessionId)),
      projections: [],
    };
    for (const { sessionId } of agents) {
      const projection = await this.#store.projection(sessionId);
      if (projection) baseline.projections.push(toRow(projection, this.#live));
    }
    return baseline;
  }

  #fanOut(owner: string, delta: ControlDelta): void {
    for (const s of this.#subscribers) {
      if (!canSee(s.principal, owner)) continue;
      try {
        s.listener(delta);
      } catch {
        // a faulty subscriber must not stop the others
      }
    }
  }
}
