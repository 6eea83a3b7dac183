import type { CallInbox, ForwardedCall, ForwardOutcome, ForwardReply } from "./call-inbox.js";

/**
 * The inbox of a store only one host uses (SQLite): every session's agent runs on that host, so
 * no call is ever forwarded. A call addressed to another host is answered `not_owner`, which makes
 * the sender resolve the owner again, and finds itself.
 */
export class LocalCallInbox implements CallInbox {
  async send(_targetHost: string, _call: ForwardedCall, _timeoutMs: number): Promise<ForwardOutcome> {
    return { status: "not_owner" };
  }

  serve(_hostId: string, _handler: (call: ForwardedCall) => Promise<ForwardReply>): () => void {
    return () => undefined;
  }
}
