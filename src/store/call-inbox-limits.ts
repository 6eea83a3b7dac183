const MiB = 1024 * 1024;

/**
 * What the call inbox of a shared database holds at once, on both sides of a forwarded call:
 * the host that forwards a call and waits on it, and the host that runs it (docs/reliability.md,
 * "Limits"), and how long a sender waits on a call its owner claimed. `serve` sets them with its
 * `--max-forwarded-…`, `--max-serving-…` and `--claimed-call-wait-ms` flags, a mounted host with
 * `callInbox`.
 */
export interface CallInboxLimits {
  /**
   * Calls this host may have forwarded and not yet seen answered; past it `overloaded`, `data:
   * {limit: "pending_calls", max}`. @default 256
   */
  maxPending: number;
  /**
   * Calls of one principal (by name) among them, so one principal's flood leaves room for the
   * others; past it that principal's call is refused `overloaded`, `data: {limit:
   * "pending_calls_per_principal", max}`. @default 64
   */
  maxPendingPerPrincipal: number;
  /**
   * Bytes those calls hold, each its body as encoded (its params, up to a frame's 1 MiB), from
   * the moment it is encoded until it is answered or given up: a call past it is refused
   * `overloaded`, `data: {limit: "pending_call_bytes", max}`, nothing recorded; a call larger than
   * the bound goes alone, once this host waits on no other. @default 32 MiB
   */
  maxPendingBytes: number;
  /**
   * Bytes of replies this host reads back at once (a reply is held from its read until it is
   * decoded and handed to its caller); a reply past it waits in the table until room frees, and
   * one larger than the bound is read alone. @default 32 MiB
   */
  maxReplyBytes: number;
  /**
   * Calls forwarded to this host that it holds at once, claimed and not yet answered (running, or
   * waiting behind an earlier call of their session); more wait unclaimed in the table, where they
   * expire. @default 256
   */
  maxServing: number;
  /**
   * Bytes those calls hold: their bodies as recorded, and each one's reply from the moment it is
   * encoded until it is written. Calls past it wait unclaimed in the table as for `maxServing`;
   * a call larger than the bound is claimed alone, once the host holds nothing else.
   * @default 32 MiB
   */
  maxServingBytes: number;
  /**
   * How long in all, from its arrival at the sender (its first send, however often it was routed),
   * a call its owner claimed is waited on while the owner still holds the session (past the
   * forward wait: it may be running there, so it is not sent again); then it is given up, its
   * caller answered `overloaded` when the owner had not begun it (taken back, it never runs), else
   * `outcome_unknown`. At least the forward wait (5 s), at most a Node timer's longest delay.
   * @default 60000
   */
  claimedWaitMs: number;
}

export const CALL_INBOX_LIMITS: Readonly<CallInboxLimits> = {
  maxPending: 256,
  maxPendingPerPrincipal: 64,
  maxPendingBytes: 32 * MiB,
  maxReplyBytes: 32 * MiB,
  maxServing: 256,
  maxServingBytes: 32 * MiB,
  claimedWaitMs: 60_000,
};
