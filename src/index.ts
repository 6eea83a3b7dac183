/**
 * The `sessionmux` package root: the host to embed or run, the agent interface, and the wire
 * types. Every type reachable from here resolves with the package's own dependencies.
 */
export * from "../protocol/index.js";
export type {
  AgentDriver,
  AgentEmit,
  InteractionRequest,
  JobHandle,
  ParkedAnswer,
  TurnAttachment,
  TurnContext,
  TurnOutcome,
} from "./agents/agent.js";
export { DemoAgent } from "./agents/demo-agent.js";
// what mux.connect's client answers, named here so an app with no @sessionmux/client can type it
export type { LiveStream } from "./client/async-iteration.js";
export type { Attachment, DownloadOptions } from "./client/attachment-download.js";
export type { CallOptions } from "./client/call-deadline.js";
export type { SessionmuxClient, SessionmuxClientApi } from "./client/client.js";
export type { ConnectionState } from "./client/connection-state.js";
export type { ControlMirror } from "./client/control-mirror-reducer.js";
export type { FollowUpdate } from "./client/follow-cursor.js";
export {
  ConnectionRefusedError,
  RemoteError,
  RemoteStreamCarrierError,
} from "./client/remote-errors.js";
export type { AuthenticateLimits, AuthenticateRequest } from "./embed/app-authentication.js";
export { bearerToken } from "./embed/bearer-token.js";
export {
  createSessionmux,
  type RequestHandler,
  type Sessionmux,
  type SessionmuxOptions,
  type UpgradeHandler,
} from "./embed/create-sessionmux.js";
export type { Principal } from "./host/principal.js";
export { StartupError, type StartupErrorCode } from "./operations/startup-error.js";
export type { CallInboxLimits } from "./store/call-inbox-limits.js";
export type { SessionStore } from "./store/session-store.js";
export type { TokenSpec } from "./transport/auth.js";
export type { InProcessClientOptions } from "./transport/in-process/in-process-connector.js";
export type { HostMetrics } from "./transport/metrics.js";
