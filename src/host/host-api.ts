import type { CallMethod, Notification, ParamsOf, ResultOf } from "../../protocol/index.js";
import type { AttachmentBody } from "../store/session-store.js";
import type { Baseline, ControlDelta, LiveState } from "./live/live-state.js";
import type { Principal } from "./principal.js";
import type { SessionReadHandle } from "./session-read-handle.js";

/** The methods that read an attachment's body. */
export type AttachmentMethod = "session.attachment" | "session.download";

/**
 * What the transports (mux, HTTP) see of the host. Every call goes through the activation table;
 * errors are thrown as `SessionmuxError`.
 */
export interface HostApi {
  readonly hostId: string;
  /** Changes at every host start. */
  readonly generation: string;
  /** Read-only view of live state (pending interactions, queues, jobs, agent status). */
  readonly live: LiveState;

  /**
   * Params must already be validated against the method's schema. `signal` fires when nobody
   * waits for the answer any more (the caller's socket closed): a search still waiting for its
   * turn is then dropped, never run.
   */
  call<M extends CallMethod>(
    principal: Principal,
    method: M,
    params: ParamsOf<M>,
    signal?: AbortSignal,
  ): Promise<ResultOf<M>>;

  /**
   * Cold check that `principal` may read `sessionId`: throws `session_not_found` (also for another
   * principal's session) or `session_retired`. Never starts an agent.
   */
  authorizeRead(principal: Principal, sessionId: string): Promise<void>;

  /**
   * The same check, then a handle to read that session (its header and head as checked, its log,
   * its projection, its commits). Transports read sessions through this, never the store.
   */
  openRead(principal: Principal, sessionId: string): Promise<SessionReadHandle>;

  /**
   * An attachment's body read chunk by chunk as `chunks` is iterated, for a transport that streams
   * it: §4 `session.attachment`'s one message or §5 `session.download`'s pieces, as `method` names;
   * the same checks and errors as `call`.
   */
  openAttachment(
    principal: Principal,
    method: AttachmentMethod,
    params: ParamsOf<"session.attachment">,
  ): Promise<AttachmentBody>;
  /**
   * An upload `principal` may read, its body read chunk by chunk as `chunks` is iterated;
   * another principal's answers exactly like a missing one (null).
   */
  readAttachment(principal: Principal, attachmentId: string): Promise<AttachmentBody | null>;
  /**
   * What `principal` stores (its sessions' event data and its attachments) and its quota (null:
   * the admin, who is not bound).
   */
  storageUsage(principal: Principal): Promise<{ storedBytes: number; maxBytes: number | null }>;
  /** Stores an upload owned by `principal`; answers its id (`storage_quota_exceeded` past its quota). */
  putAttachment(
    principal: Principal,
    input: { name: string; type: string; bytes: Uint8Array },
  ): Promise<string>;
  /**
   * Called on every commit notice of any session, a dismissal's included (for caches of list
   * answers), and on the answer of a `resume` call forwarded to another host before it is handed
   * on (its owner may have restored the session, a commit this host hears of only later).
   */
  onAnyCommit(listener: () => void): () => void;

  /** Control feed for `session.control`, filtered to what the principal may see. */
  subscribeControl(principal: Principal, listener: (delta: ControlDelta) => void): () => void;
  controlBaseline(principal: Principal): Promise<Baseline>;

  /** §6 notifications, filtered to what the principal may see. */
  subscribeNotifications(principal: Principal, listener: (notification: Notification) => void): () => void;
  /**
   * The same, one call per tick with the tick's coalesced notifications; principals who see the
   * same ones get the same frozen array, so it can be encoded once (keyed by identity).
   */
  subscribeNotificationLists(
    principal: Principal,
    listener: (list: readonly Notification[]) => void,
  ): () => void;

  /** Detaches agents, closes open turns as interrupted. Does not close the store. */
  shutdown(): Promise<void>;
}
