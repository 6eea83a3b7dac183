/**
 * How a call reaches the host that owns a session's agent when it arrives at another host: the
 * receiving host records it durably for the owner (`send`), the owner runs it through its own
 * activation policy and handlers and records the outcome (`reply`), and the receiving host
 * answers its client with that outcome. A host with no shared store never forwards.
 */
export interface CallInbox {
  /**
   * Records `call` for `targetHost` and resolves with its outcome once the target replied, or
   * `{status:"timeout"}` when the target has not claimed it after `timeoutMs`: it is taken back
   * unrun (the caller then checks the lease again: an expired owner's calls are taken over by the
   * resume rule). A call is delivered and answered at most once. One the target claimed may be
   * running there, so it is not taken back while waited on: its reply is waited for past
   * `timeoutMs` as long as `withdraw` has not aborted, up to a longest wait of the inbox's
   * (counted from `waitingSince`, when the caller's wait began, its first send of the call when it
   * sent it more than once; from this send when left out), and then the call is given up, its row
   * deleted so no reply written later is taken: `{status:"not_begun"}` when the target had not
   * begun it (it can then no longer begin it: it never runs), else `{status:"unknown"}`. Once
   * `withdraw` aborts (the target no longer holds the session), a call the target has not begun
   * (not claimed, put back unclaimed, or claimed and not yet begun, which the target can then no
   * longer begin) is taken back unrun (`{status:"withdrawn"}`); a begun one's reply is waited for
   * a moment more (a target that let the session go as it answered), and then it is given up,
   * `unknown`.
   * When the store fails under it, rejects `persistence_failure` (retryable) if the call was
   * certainly not recorded, else `outcome_unknown`: recorded, or maybe, its target may run it.
   */
  send(
    targetHost: string,
    call: ForwardedCall,
    timeoutMs: number,
    withdraw?: AbortSignal,
    waitingSince?: number,
  ): Promise<ForwardOutcome>;
  /**
   * Delivers calls addressed to `hostId` (also ones recorded while it was away), oldest first.
   * The function returned stops it: a call claimed and still waiting for its turn behind an
   * earlier call of its session is then answered `not_owner` at once (it will not run here), so
   * its sender resolves the owner again rather than wait for that earlier call to end.
   */
  serve(hostId: string, handler: (call: ForwardedCall) => Promise<ForwardReply>): () => void;
  /**
   * `hostId` lost the session's lease (another host took it, or its renewal was refused): the
   * calls of the session claimed for it that still wait for their turn are answered `not_owner`
   * at once, as when serving stops, rather than when the earlier call ends.
   */
  leaseLost?(hostId: string, sessionId: string): void;
  /**
   * Stops: every call waiting on a reply is told what became of it (taken back unrun, its reply,
   * or `unknown`). A second close resolves at once. A host closes it once it shut down, before
   * its sockets close, so their forwarded calls' answers reach their callers.
   */
  close?(): Promise<void>;
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
  /**
   * The target claimed the call and, still holding the session, had not begun it at the longest
   * wait (its serving bounds full, or the session's earlier calls slow): taken back, it never runs.
   */
  | { status: "not_begun" }
  /** The target began the call and lost the session, or held it past the longest wait, before replying: it may or may not have run. */
  | { status: "unknown" };
