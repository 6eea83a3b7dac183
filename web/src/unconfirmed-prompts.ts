import { newClientMessageId } from "../../src/client/index.js";

/**
 * Prompts whose answer never came (the call timed out after its frame reached a socket): the host
 * may have taken them. Each keeps its `clientMessageId` for the text given back to its session's
 * composer, so sending that text again is answered by the host's record of the first (§4: prompt
 * is idempotent on its `clientMessageId`) instead of running it a second time.
 */
export class UnconfirmedPrompts {
  private readonly prompts = new Map<string, { text: string; clientMessageId: string }>();

  /**
   * The id to send `text` to `sessionId` with: the unconfirmed one's for the same text, else a new
   * one. Either way the session's next send uses it up: a text typed again after another prompt
   * went is a new prompt, never answered by an old record.
   */
  idFor(sessionId: string, text: string): string {
    const kept = this.prompts.get(sessionId);
    this.prompts.delete(sessionId);
    return kept?.text === text ? kept.clientMessageId : newClientMessageId();
  }

  /** The host never answered this send: it may have the prompt. */
  keep(sessionId: string, text: string, clientMessageId: string): void {
    this.prompts.set(sessionId, { text, clientMessageId });
  }
}

/**
 * Whether a failed send may still have reached the host: a call that timed out or was aborted
 * after its frame went out (`data.sent`), or one the host says it cannot tell (`outcome_unknown`).
 */
export function outcomeUnknown(error: unknown): boolean {
  const { code, data } = (error ?? {}) as { code?: string; data?: { sent?: unknown } };
  return code === "outcome_unknown" || data?.sent === true;
}
