/** The messages between a benchmark and its follower fleet child (see fleet-child.ts). */
export type FleetKind = "raw" | "mux" | "sio";

export interface FleetStream {
  /** Stream id on the wire; also the key targets use. */
  id: number;
  sessionId: string;
  afterSeq: number;
}

export interface FleetConnect {
  cmd: "connect";
  kind: FleetKind;
  url: string;
  token?: string;
  count: number;
  /** Every connection follows every one of these streams. */
  streams: FleetStream[];
  concurrency?: number;
  recordLatency?: boolean;
}

export type FleetCommand =
  | FleetConnect
  | { cmd: "target"; targets: [number, number][]; timeoutMs: number }
  | { cmd: "stats" }
  | { cmd: "stall"; count: number }
  | { cmd: "unstall" }
  | { cmd: "drop" }
  | { cmd: "reconnect"; concurrency?: number }
  /** Closes every follower and forgets them and their counts: the fleet is as if just started. */
  | { cmd: "reset" }
  | { cmd: "close" };

export interface FleetStats {
  events: number;
  dup: number;
  gap: number;
  errors: string[];
  latencies: number[];
  /** The follower process's CPU (user + system, ms) since it started. */
  cpuMs?: number;
}

export interface FleetReply {
  ok: boolean;
  /** Wall-clock time (ms) the command completed, comparable across processes. */
  at: number;
  ms: number;
  error?: string;
  stats?: FleetStats;
}
