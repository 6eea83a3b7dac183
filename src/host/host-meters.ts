import type { ForwardOutcome } from "../store/call-inbox.js";

/** What the host reports about its agents; implemented by the metrics registry in transport. */
export interface HostMeters extends ClusterMeters {
  /** The number of sessions with a live agent on this host, after every change. */
  agentsLive(count: number): void;
}

/** Why a host's lease is gone before it released it: each served from the first scrape on. */
export const LEASE_LOSSES = ["renewal_refused", "fenced"] as const;
export type LeaseLoss = (typeof LEASE_LOSSES)[number];

/** What a host sharing its store with others reports about its session leases. */
export interface LeaseMeters {
  /** The number of leases this host holds, after every change. */
  leasesHeld(count: number): void;
  /** A lease taken from a host whose lease had run out (its running turn closed `interrupted`). */
  leaseTakenOver(): void;
  /** A lease this host held is gone: a renewal was refused, or an append under it was fenced. */
  leaseLost(reason: LeaseLoss): void;
  /** A renewal round the store did not answer: the leases may run out if it goes on. */
  leaseRenewalFailed(): void;
}

/** What a host sharing its store with others reports: its leases, and the calls it forwarded. */
export interface ClusterMeters extends LeaseMeters {
  /** A call sent to the host running the session's agent, by how it came back. */
  callForwarded(outcome: ForwardMetric): void;
}

/** How a forwarded call came back; `not_recorded`: the store could not record it, so it ran nowhere. */
export type ForwardMetric = ForwardOutcome["status"] | "not_recorded";

/** Every `ForwardMetric`, each served from the first scrape on. */
export const FORWARD_METRICS = [
  "ok",
  "error",
  "not_owner",
  "timeout",
  "withdrawn",
  "not_begun",
  "unknown",
  "not_recorded",
] as const satisfies readonly ForwardMetric[];

// An outcome added to `ForwardOutcome` and not listed above fails to compile here.
const everyForwardMetric: Exclude<ForwardMetric, (typeof FORWARD_METRICS)[number]> extends never
  ? true
  : never = true;
void everyForwardMetric;
