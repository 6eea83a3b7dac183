/**
 * What a store reports about its writes. The store knows nothing of Prometheus: the host's
 * metrics registry (in transport, the layer that serves `/metrics`) implements this.
 */
export interface StoreMetrics {
  /** One committed write transaction: its duration and the events it appended. */
  committed(seconds: number, appendedEvents: number): void;
  /** A commit listener threw (the store went on delivering to the others). */
  listenerFailed?(): void;
}

/** A connection pool's connections now (a networked store's; the embedded one has none). */
export interface PoolStats {
  /** Connections open, idle or lent out. */
  total: number;
  idle: number;
  /** Requests waiting for a connection: the pool is too small for the load, or the database slow. */
  waiting: number;
}
