import type { ControlItem, Interaction, Job, QueueItem, SessionRow } from "../../protocol/index.js";
import { replacesRow } from "./row-watermark.js";

type LiveAgentState = "attached" | "running" | "idle";

/**
 * The client's copy of the host's live state (§5 `session.control`). Keyed by session id
 * (interactions by interaction id). Live state has no durable sequence: every baseline replaces it.
 */
export interface ControlMirror {
  /** The host generation of the last baseline; undefined before the first one. */
  readonly generation: string | undefined;
  /**
   * True from a baseline whose generation differs from the previous baseline's until the next
   * baseline: the host restarted and live state was rebuilt (never when the socket only moved to
   * another host of one shared database: their baselines carry the same generation).
   */
  readonly generationChanged: boolean;
  /** True while the control stream is down; the mirror may be out of date until the next baseline. */
  readonly stale: boolean;
  readonly agents: Readonly<Record<string, LiveAgentState>>;
  readonly queues: Readonly<Record<string, readonly QueueItem[]>>;
  readonly jobs: Readonly<Record<string, readonly Job[]>>;
  readonly interactions: Readonly<Record<string, Interaction>>;
  readonly projections: Readonly<Record<string, SessionRow>>;
  /**
   * The change that produced this mirror, for callers that log changes: a control item, the
   * stream lost (`stale`), or a session deleted (`removed`, from the §6 notification).
   */
  readonly lastChange:
    | ControlItem
    | { readonly kind: "stale" }
    | { readonly kind: "removed"; readonly sessionId: string }
    | undefined;
}

/** The mirror before any baseline. */
export const EMPTY_MIRROR: ControlMirror = Object.freeze({
  generation: undefined,
  generationChanged: false,
  stale: true,
  agents: {},
  queues: {},
  jobs: {},
  interactions: {},
  projections: {},
  lastChange: undefined,
});

const byKey = <T>(items: readonly T[], key: (item: T) => string): Record<string, T> =>
  Object.fromEntries(items.map((item) => [key(item), item]));

const without = <T>(record: Readonly<Record<string, T>>, key: string): Record<string, T> => {
  const { [key]: _dropped, ...rest } = record;
  return rest;
};

/** Marks the mirror out of date (the control stream was lost); the next baseline clears it. */
export function markStale(mirror: ControlMirror): ControlMirror {
  return { ...mirror, stale: true, lastChange: { kind: "stale" } };
}

/**
 * Drops a deleted session's row: the control stream sends no item for a delete (its row is gone,
 * not changed), only `session.removed` tells of it, and its last row would stay until the next
 * baseline.
 */
export function removeSession(mirror: ControlMirror, sessionId: string): ControlMirror {
  return {
    ...mirror,
    projections: without(mirror.projections, sessionId),
    lastChange: { kind: "removed", sessionId },
  };
}

/** Applies one control item. Pure: returns a new mirror, never mutates the old one. */
export function reduceControl(mirror: ControlMirror, item: ControlItem): ControlMirror {
  switch (item.kind) {
    case "baseline":
      return {
        generation: item.generation,
        generationChanged: mirror.generation !== undefined && mirror.generation !== item.generation,
        stale: false,
        agents: Object.fromEntries(item.agents.map((a) => [a.sessionId, a.state])),
        queues: Object.fromEntries(item.queues.map((q) => [q.sessionId, q.items])),
        jobs: Object.fromEntries(item.jobs.map((j) => [j.sessionId, j.jobs])),
        interactions: byKey(item.interactions, (i) => i.interactionId),
        projections: byKey(item.projections, (p) => p.sessionId),
        lastChange: item,
      };
    case "agent": {
      if (item.state !== "detached") {
        return { ...mirror, agents: { ...mirror.agents, [item.sessionId]: item.state }, lastChange: item };
      }
      // §5: detached clears that session's jobs; its durable queue and interactions stay.
      return {
        ...mirror,
        agents: without(mirror.agents, item.sessionId),
        jobs: without(mirror.jobs, item.sessionId),
        lastChange: item,
      };
    }
    case "queue":
      return { ...mirror, queues: { ...mirror.queues, [item.sessionId]: item.items }, lastChange: item };
    case "jobs":
      return { ...mirror, jobs: { ...mirror.jobs, [item.sessionId]: item.jobs }, lastChange: item };
    case "interaction.requested":
      return {
        ...mirror,
        interactions: { ...mirror.interactions, [item.interaction.interactionId]: item.interaction },
        lastChange: item,
      };
    case "interaction.resolved":
    case "interaction.withdrawn":
      return { ...mirror, interactions: without(mirror.interactions, item.interactionId), lastChange: item };
    case "projection":
      // merged by watermark, a cleared session's row replacing the old log's before the next baseline
      if (!replacesRow(mirror.projections[item.sessionId], item.projection)) {
        return { ...mirror, lastChange: item };
      }
      return {
        ...mirror,
        projections: { ...mirror.projections, [item.sessionId]: item.projection },
        lastChange: item,
      };
    default:
      // An item kind from a newer host: nothing to apply.
      return mirror;
  }
}
