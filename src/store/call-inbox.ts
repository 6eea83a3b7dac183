/**
 * How a call reaches the host that owns a session's agent when it arrives at another host: the
 * receiving host records it durably for the owner (`send`), the owner runs it through its own
 * activation policy and handlers and records the outcome (`reply`), and the receiving host
 * answers its client with that outcome. A host with no shared store never forwards.
 */
export interface CallInbox {
  /**
   * Records `call` for `targetHost` and resolves with its outcome once the target replied, or
   * `{status:"timeout"}` after `timeoutMs` (the caller then checks the lease again: an expired
   * owner's calls are taken over by the resume rule). A call is answered at most once. Once
   * `withdraw` aborts (the target no longer holds the session), a call the target has not claimed
   * yet is taken back unrun (`{status:"withdrawn"}`); one it claimed may have run, or be running:
   * its reply is waited for a moment more (a target that let the session go as it answered), and
   * then the call is given up, `{status:"unknown"}`, so no reply it writes later is taken.
   */
  send(
    targetHost: string,
    call: ForwardedCall,
    timeoutMs: number,
    withdraw?: AbortSignal,
  ): Promise<ForwardOutcome>;
  /** Delivers calls addressed to `hostId` (also ones recorded while it was away), oldest first. */
  serve(hostId: string, handler: (call: ForwardedCall) => Promise<ForwardReply>): () => void;
}

export interface ForwardedCall {
  callId: string;
  fromHost: string;
  sessionId: string;
  principal: { name: string; admin: boolean };
  method: string;
  params: unknown;
}

/** The owner's answer: a result, or a typed error (`code`, `message`, `data` of protocol-v1). */
export type ForwardReply =
  | { status: "ok"; result: unknown }
  | { status: "error"; code: string; message: string; data?: unknown }
  /** The target no longer holds the session's lease: the sender resolves the owner again. */
  | { status: "not_owner" };

export type ForwardOutcome =
  | ForwardReply
  | { status: "timeout" }
  | { status: "withdrawn" }
  /** The target claimed the call and lost the session before replying: it may or may not have run. */
  | { status: "unknown" };
