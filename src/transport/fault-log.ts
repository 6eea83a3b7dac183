/**
 * Where transport reports faults that are not the client's doing: the host's one pino logger,
 * passed down (`error(obj, msg)` is pino's shape). Internal errors are logged once, here, with
 * their context, and never sent to the peer.
 */
export interface FaultLog {
  error(obj: object, msg: string): void;
}
