import type { FleetKind } from "./fleet-protocol.js";
import type { DeltaEvent } from "./workload.js";

/**
 * A server that carries session events to followers: sessionmux, the raw `ws` baseline or a peer.
 * Stream id on the wire = session index + 1, the same for every subject.
 */
export interface FanoutSubject {
  readonly name: string;
  readonly kind: FleetKind;
  readonly url: string;
  readonly token?: string;
  /** Creates the sessions (not timed). */
  prepare(sessionIds: readonly string[]): Promise<void>;
  /** Appends `events` to session `index` and delivers them; resolves with the last seq once acknowledged. */
  publish(index: number, events: readonly DeltaEvent[]): Promise<number>;
  /** Sockets the server still holds open (a resume waits for the dropped ones to be gone). */
  openSockets(): Promise<number>;
  close(): Promise<void>;
}

export type SubjectFactory = () => Promise<FanoutSubject>;
