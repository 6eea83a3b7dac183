import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import {
  ActivationTable,
  type CallMethod,
  isErrorCode,
  isMethodName,
  Methods,
  paramsValidator,
  SessionmuxError,
} from "../../protocol/index.js";
import type { CallInbox, ForwardedCall, ForwardOutcome, ForwardReply } from "../store/call-inbox.js";
import type { HostStore } from "../store/live-state-store.js";
import type { LeaseHolder, SessionLeaseStore } from "../store/session-lease.js";
import type { HostLeases } from "./host-leases.js";
import type { ClusterMeters, ForwardMetric } from "./host-meters.js";
import { NotOwner } from "./not-owner.js";
import type { Principal } from "./principal.js";

/**
 * How long a forwarded call the owner has not claimed may wait for it before the owner is resolved
 * again; one it claimed is waited on while it holds the session (the inbox's claimed wait).
 */
export const DEFAULT_FORWARD_TIMEOUT_MS = 5_000;
/** Owner resolutions per call: a lease that keeps moving (or an owner that keeps timing out) ends here. */
const MAX_ROUTES = 4;
/**
 * While a forwarded call waits, the owner's lease is read again when it would expire, and no
 * more often than this (a host clock ahead of the store's would otherwise read it in a loop).
 */
const LEASE_RECHECK_MIN_MS = 1_000;

/** Runs a parsed call here, through this host's activation policy and handlers. */
/** Runs a call on this host; `signal` fires when its caller is gone (see `HostApi.call`). */
export type LocalRun = (
  principal: Principal,
  method: CallMethod,
  params: unknown,
  signal?: AbortSignal,
) => Promise<unknown>;

export interface CallRouterOptions {
  hostId: string;
  store: HostStore;
  leaseStore: SessionLeaseStore;
  leases: HostLeases;
  inbox: CallInbox;
  run: LocalRun;
  logger: Logger;
  forwardTimeoutMs?: number;
  meters?: Pick<ClusterMeters, "callForwarded">;
  /**
   * A forwarded `resume` call succeeded on its owner, which restored the session for `principal`
   * if they had dismissed it (and committed that) before answering; told before the answer is
   * handed on, since this host's commit feed hears that restore on another connection, maybe later.
   */
  forwardedResume?: (principal: Principal) => void;
  /** True once the host stops accepting work: forwarded calls are then answered `not_owner`. */
  closing: () => boolean;
}

/**
 * Commands across hosts. A call that may act on a session's agent (activation `resume`,
 * `live-only` or `explicit`) runs where that agent runs: here when this host holds the session's
 * lease or nobody does (the resume rule then takes it here), else it is forwarded through the
 * call inbox to the holder, which runs it through its own policy and handlers as the same
 * principal. Its outcome, typed errors included, is the answer to the client. A `timeout` (the
 * owner did not claim it within the forward wait) or `not_owner` makes the router resolve the
 * owner again (an expired lease is then taken here), and so does the owner's lease ending while
 * the call waits unclaimed, or claimed and not begun (see `#forward`). A call the owner claimed is
 * waited on while the owner holds the session, past the forward wait, up to the inbox's longest
 * wait counted from the call's arrival here (its first route); one it began and did not answer
 * before its lease ended, or within that wait, is answered `outcome_unknown` (not retryable): it
 * may have run there, so it is not sent again unasked. One it had claimed and not begun by then is
 * taken back unrun and answered `overloaded` (retryable). One waiting as this host closes (its
 * inbox closing under it) is answered `outcome_unknown` once the owner began it, unless the
 * owner's answer is already written (then that is the answer); one taken back unrun then
 * (unclaimed, or claimed and not begun) is answered `host_shutting_down`, as a call arriving then
 * is, and routed no more.
 */
export class CallRouter {
  readonly #options: CallRouterOptions;
  readonly #timeoutMs: number;
  /** The lease watches of the forwarded calls waiting, by session: woken by a lease notice. */
  readonly #watches = new Map<string, Set<() => void>>();
  /** Lease notices heard so far, of any session: one heard while an owner was read is not missed. */
  #leaseNotices = 0;

  constructor(options: CallRouterOptions) {
    this.#options = options;
    this.#timeoutMs = options.forwardTimeoutMs ?? DEFAULT_FORWARD_TIMEOUT_MS;
  }

  async call(
    principal: Principal,
    method: CallMethod,
    params: unknown,
    signal?: AbortSignal,
  ): Promise<unknown> {
    const { run } = this.#options;
    if (!routed(method)) return run(principal, method, params, signal);
    // the inbox's longest wait on a claimed call counts from here, however often it is routed
    const waitingSince = Date.now();
    for (let attempt = 0; attempt < MAX_ROUTES; attempt++) {
      const sessionId = await this.#sessionOf(method, params);
      const noticesBefore = this.#leaseNotices;
      const holder = sessionId === null ? null : await this.#owner(sessionId);
      if (holder === null || sessionId === null) {
        try {
          return await run(principal, method, params, signal);
        } catch (err) {
          if (err instanceof NotOwner) continue;
          throw err;
        }
      }
      const call: ForwardedCall = {
        callId: randomUUID(),
        fromHost: this.#options.hostId,
        sessionId,
        principal: { name: principal.name, admin: principal.admin },
        method,
        params,
      };
      let outcome: ForwardOutcome;
      try {
        outcome = await this.#forward(holder, call, noticesBefore, waitingSince);
      } catch (err) {
        // the store failed under the call: it may be recorded for the owner (`outcome_unknown`),
        // or it certainly is not (`persistence_failure`); either is the caller's answer as it is
        const failed = err instanceof SessionmuxError ? forwardFailure(err.code) : undefined;
        if (failed) this.#options.meters?.callForwarded(failed);
        throw err;
      }
      this.#options.meters?.callForwarded(outcome.status);
      if (outcome.status === "ok") {
        if (ActivationTable[method] === "resume") this.#options.forwardedResume?.(principal);
        return outcome.result;
      }
      if (outcome.status === "unknown") {
        // not sent again: it may have run there, and would run twice; the caller, who knows what it sent, decides
        throw new SessionmuxError(
          "outcome_unknown",
          `${this.#options.closing() ? "this host shut down while the host running this session's agent held this call" : "the host running this session's agent began this call and then lost the session, or held it past the longest wait, before it answered"}: ${UNKNOWN_ADVICE}`,
          { data: { method, outcome: "unknown" } },
        );
      }
      if (outcome.status === "not_begun") {
        // taken back unrun from an owner that still holds the session: routed again, it would
        // reach the same owner and wait behind the same calls once more; the caller decides
        throw new SessionmuxError(
          "overloaded",
          "the host running this session's agent took this call and had not begun it within the longest wait (it is busy with this session's earlier calls, or with others); it was taken back and never runs: retry shortly",
          { data: { method } },
        );
      }
      if (outcome.status === "error") {
        throw new SessionmuxError(
          isErrorCode(outcome.code) ? outcome.code : "internal_error",
          outcome.message,
          {
            data: outcome.data,
          },
        );
      }
      this.#options.logger.debug(
        { sessionId, target: holder.hostId, method, status: outcome.status },
        "forwarded call not served",
      );
      // taken back unrun (or refused by the owner) as this host closes: routed no more, run nowhere
      if (this.#options.closing()) {
        throw new SessionmuxError("host_shutting_down", "the host is shutting down; reconnect shortly");
      }
    }
    throw new SessionmuxError(
      "overloaded",
      "the host running this session's agent did not answer; retry shortly",
      {
        data: { method },
      },
    );
  }

  /**
   * The session's lease was taken or released (a notice; renewals send none): the calls forwarded
   * for it read its lease now, so one sent to a host that just let it go is routed again at once.
   */
  leaseChanged(sessionId: string): void {
    this.#leaseNotices += 1;
    for (const wake of this.#watches.get(sessionId) ?? []) wake();
  }

  /** The owner's side: a call forwarded here runs only while this host still holds the lease. */
  async serve(call: ForwardedCall): Promise<ForwardReply> {
    if (this.#options.closing() || !this.#options.leases.lease(call.sessionId))
      return { status: "not_owner" };
    if (!isMethodName(call.method) || Methods[call.method].kind !== "call") {
      return { status: "error", code: "unknown_method", message: `unknown method ${call.method}` };
    }
    const method = call.method as CallMethod;
    try {
      const params = paramsValidator(method).parse(call.params);
      const result = await this.#options.run(call.principal, method, params);
      return { status: "ok", result };
    } catch (err) {
      if (err instanceof NotOwner) return { status: "not_owner" };
      if (err instanceof SessionmuxError)
        return {
          status: "error",
          code: err.code,
          message: err.message,
          ...(err.data !== undefined ? { data: err.data } : {}),
        };
      this.#options.logger.error({ err, method, sessionId: call.sessionId }, "a forwarded call failed");
      return { status: "error", code: "internal_error", message: "internal error" };
    }
  }

  /** The session a call acts on; null when it names none this host could route by. */
  async #sessionOf(method: CallMethod, params: unknown): Promise<string | null> {
    const p = params as { sessionId?: unknown; interactionId?: unknown };
    if (method === "session.respond") {
      if (typeof p.interactionId !== "string") return null;
      const stored = await this.#options.store.interaction(p.interactionId);
      return stored?.interaction.sessionId ?? null;
    }
    return typeof p.sessionId === "string" ? p.sessionId : null;
  }

  /** Null: run here (this host holds the lease, or nobody does). Else the live holder's lease. */
  async #owner(sessionId: string): Promise<LeaseHolder | null> {
    const { leases, leaseStore, hostId } = this.#options;
    if (leases.lease(sessionId)) return null;
    const holder = await leaseStore.leaseHolder(sessionId);
    if (!holder || holder.hostId === hostId) return null;
    return holder;
  }

  /**
   * Sends the call to the holder's host, watching its lease meanwhile: a host that died claims
   * nothing and answers nothing, but its lease says so once it ends (not renewed past its expiry,
   * released, or taken by another host). The call is then taken back if the owner has not begun
   * it, claimed or not (`withdrawn`), and the owner resolved again, rather than waiting out the
   * forward timeout; if begun, and its reply does not follow at once, it is given up (`unknown`).
   */
  async #forward(
    holder: LeaseHolder,
    call: ForwardedCall,
    noticesBefore: number,
    waitingSince: number,
  ): Promise<ForwardOutcome> {
    const ended = new AbortController();
    const answered = new AbortController();
    void this.#leaseEnds(holder, answered.signal, noticesBefore).then((gone) => {
      if (gone) ended.abort();
    });
    try {
      return await this.#options.inbox.send(holder.hostId, call, this.#timeoutMs, ended.signal, waitingSince);
    } finally {
      answered.abort();
    }
  }

  /**
   * True once `holder`'s lease is no longer the session's, read again at each expiry it has (the
   * store's clock; at most every `LEASE_RECHECK_MIN_MS`) and at each notice of it
   * (`leaseChanged`); false once `stop` aborts.
   */
  async #leaseEnds(holder: LeaseHolder, stop: AbortSignal, noticesBefore: number): Promise<boolean> {
    const { sessionId } = holder;
    let noticed = new AbortController();
    const wake = () => noticed.abort();
    const watches = this.#watches.get(sessionId) ?? new Set();
    this.#watches.set(sessionId, watches);
    watches.add(wake);
    // a notice heard while `holder` was read may be of its end, which the read did not see: read again at once
    if (this.#leaseNotices !== noticesBefore) wake();
    try {
      let expiresAt = holder.expiresAt;
      for (;;) {
        const wait = Math.max(LEASE_RECHECK_MIN_MS, expiresAt - Date.now());
        const signal = AbortSignal.any([stop, noticed.signal]);
        await sleep(wait, undefined, { signal }).catch(() => undefined);
        if (stop.aborted) return false;
        noticed = new AbortController();
        // a read that failed is made again after the shortest wait
        const now = await this.#options.leaseStore.leaseHolder(sessionId).catch(() => undefined);
        if (stop.aborted) return false;
        if (now === undefined) continue;
        if (now === null || now.hostId !== holder.hostId || now.generation !== holder.generation) return true;
        expiresAt = now.expiresAt;
      }
    } finally {
      watches.delete(wake);
      if (watches.size === 0 && this.#watches.get(sessionId) === watches) this.#watches.delete(sessionId);
    }
  }
}

/** What a caller told `outcome_unknown` for a forwarded call may do. */
const UNKNOWN_ADVICE =
  "whether the call took effect is unknown; check the session, then send it again if it did not (a prompt sent again with its clientMessageId runs at most once)";

/** How a forward the store failed under is counted: `unknown` as a call claimed and given up is. */
function forwardFailure(code: string): ForwardMetric | undefined {
  if (code === "outcome_unknown") return "unknown";
  if (code === "persistence_failure") return "not_recorded";
  return undefined;
}

/** Calls that may act on an agent; `create` and `fork` make a new session, which nobody owns yet. */
function routed(method: CallMethod): boolean {
  if (method === "session.create" || method === "session.fork") return false;
  return ActivationTable[method] !== "cold";
}
