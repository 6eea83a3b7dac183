import type { CallInbox, ForwardedCall, ForwardOutcome, ForwardReply } from "../../src/store/call-inbox.js";

export interface Sent {
  target: string;
  call: ForwardedCall;
  timeoutMs: number;
}

/**
 * The inbox between hosts as a test scripts it: records each call a host forwards and answers it
 * from `answers` (past them, a timeout); records who serves calls and when they stop.
 */
export class ScriptedInbox implements CallInbox {
  readonly sent: Sent[] = [];
  /** Each send's `waitingSince`, in order: when its caller's wait began. */
  readonly waitingSince: (number | undefined)[] = [];
  /** Answers in order; past them, every send times out. */
  answers: ForwardOutcome[] = [];
  /** Errors sends reject with, in order, before any answer is given (the store failed under them). */
  failures: unknown[] = [];
  /** Runs before a send is answered (the world may change meanwhile). */
  meanwhile: ((sent: Sent) => Promise<void>) | undefined;
  /** A send is answered only once its sender withdraws it (as a dead owner's inbox never answers), then `withdrawn`. */
  untilWithdrawn = false;
  /** Each `serve`: the host served and its handler, and whether it was stopped. */
  readonly served: {
    hostId: string;
    handler: (call: ForwardedCall) => Promise<ForwardReply>;
    stopped: boolean;
  }[] = [];

  async send(
    target: string,
    call: ForwardedCall,
    timeoutMs: number,
    withdraw?: AbortSignal,
    waitingSince?: number,
  ): Promise<ForwardOutcome> {
    const sent = { target, call, timeoutMs };
    this.sent.push(sent);
    this.waitingSince.push(waitingSince);
    await this.meanwhile?.(sent);
    if (this.failures.length > 0) throw this.failures.shift();
    if (this.untilWithdrawn && withdraw) {
      if (!withdraw.aborted)
        await new Promise((resolve) => withdraw.addEventListener("abort", resolve, { once: true }));
      return { status: "withdrawn" };
    }
    return this.answers.shift() ?? { status: "timeout" };
  }

  /** Each `leaseLost`: the host and the session whose lease it lost. */
  readonly lost: { hostId: string; sessionId: string }[] = [];

  leaseLost(hostId: string, sessionId: string): void {
    this.lost.push({ hostId, sessionId });
  }

  serve(hostId: string, handler: (call: ForwardedCall) => Promise<ForwardReply>): () => void {
    const entry = { hostId, handler, stopped: false };
    this.served.push(entry);
    return () => {
      entry.stopped = true;
    };
  }
}
