/**
 * The sessionmux client SDK, browser-safe: nothing here (or below) imports a Node module.
 * Node callers use `./node.js`, which supplies `ws` with the Authorization header.
 */
// What a caller handles: every error the client rejects with is a `SessionmuxError` (switch on its
// `code`) or a `RemoteStreamCarrierError`, and the values calls and follows hand back.
export {
  ERROR_CODE_LIST,
  type ErrorCategory,
  type ErrorCode,
  isErrorCode,
  isRetryable,
  SessionmuxError,
  type WireError,
} from "../../protocol/errors.js";
export type {
  AttachmentShell,
  EventDataOf,
  EventType,
  InteractionKind,
  Resolution,
  SessionEvent,
  TurnEndState,
  UserMessageMeta,
} from "../../protocol/events.js";
export type { HelloFrame, NotificationName, NotificationValue } from "../../protocol/frames.js";
export type {
  AttachmentInput,
  CallMethod,
  ControlItem,
  FollowItem,
  ItemOf,
  MethodName,
  ParamsOf,
  ResultOf,
  SessionPage,
  StreamMethod,
} from "../../protocol/methods.js";
export type {
  AgentState,
  Interaction,
  Job,
  JobState,
  LastState,
  QueueItem,
  SessionHeader,
  SessionRow,
} from "../../protocol/rows.js";
export {
  DEFAULT_MAX_BUFFERED,
  type IterateOptions,
  iterate,
  type LiveStream,
  liveStream,
} from "./async-iteration.js";
export type { Attachment, DownloadOptions } from "./attachment-download.js";
export { type BackoffPolicy, backoffCeiling, backoffDelay, DEFAULT_BACKOFF } from "./backoff.js";
export { type CallOptions, DEFAULT_CALL_TIMEOUT_MS } from "./call-deadline.js";
export { isResendable } from "./call-retry.js";
export {
  type ClientOptions,
  createClient,
  newClientMessageId,
  type PromptParams,
  SessionmuxClient,
  type SessionmuxClientApi,
} from "./client.js";
export {
  type ConnectionEvent,
  type ConnectionState,
  type ConnectionStateName,
  isTerminal,
  transition,
} from "./connection-state.js";
export { type ControlMirrorOptions, controlMirror } from "./control-mirror.js";
export { type ControlMirror, EMPTY_MIRROR, markStale, reduceControl } from "./control-mirror-reducer.js";
export {
  applyFollowItem,
  type FollowCursor,
  type FollowStep,
  type FollowUpdate,
  initialCursor,
  interruptedCursor,
  reopenParams,
} from "./follow-cursor.js";
export { type FollowOptions, followSession } from "./follow-session.js";
export { DEFAULT_KEEPALIVE, type KeepAliveOptions } from "./keepalive.js";
export {
  browserNetworkSignals,
  clockJumpSignals,
  type NetworkSignal,
  type NetworkSignals,
} from "./network-signals.js";
export {
  type CarrierReason,
  ConnectionRefusedError,
  RemoteError,
  RemoteStreamCarrierError,
  shouldRetry,
} from "./remote-errors.js";
export {
  base64Url,
  browserSocketFactory,
  browserSubprotocols,
  type SocketFactory,
  type WebSocketConstructor,
  type WebSocketLike,
} from "./socket.js";
export { type StreamRecovery, streamRecovery } from "./stream-recovery.js";
