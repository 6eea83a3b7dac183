/** What the host reports about its agents; implemented by the metrics registry in transport. */
export interface HostMeters {
  /** The number of sessions with a live agent on this host, after every change. */
  agentsLive(count: number): void;
}
