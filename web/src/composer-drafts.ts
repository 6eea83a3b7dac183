/**
 * What the operator typed into the composer and did not send, kept per session: switching to
 * another session puts that session's own draft in the composer, so text written for one session
 * is never sent to another by an Enter after a click on the list.
 */
export class ComposerDrafts {
  private readonly drafts = new Map<string, string>();

  constructor(private readonly input: HTMLTextAreaElement) {}

  /** The composer moves from session `from` to session `to` (either may be none). */
  switchTo(from: string | undefined, to: string | undefined): void {
    if (from === to) return;
    if (from !== undefined) this.keep(from, this.input.value);
    this.input.value = to === undefined ? "" : (this.drafts.get(to) ?? "");
    if (to !== undefined) this.drafts.delete(to);
  }

  /**
   * A prompt the host refused was not sent: its text comes back to its session's composer,
   * unless something new was typed there meanwhile. `shown` is the session the composer is on.
   */
  giveBack(sessionId: string, text: string, shown: string | undefined): void {
    if (sessionId === shown) {
      if (this.input.value === "") this.input.value = text;
    } else if (!this.drafts.has(sessionId)) {
      this.drafts.set(sessionId, text);
    }
  }

  /** The session is gone: its draft has nowhere to go. */
  drop(sessionId: string): void {
    this.drafts.delete(sessionId);
  }

  private keep(sessionId: string, text: string): void {
    if (text === "") this.drafts.delete(sessionId);
    else this.drafts.set(sessionId, text);
  }
}
