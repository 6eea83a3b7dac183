import type { QueueItem } from "../../protocol/index.js";
import { askText } from "./text-dialog.js";

/** What editing a queued prompt needs of the console. */
export interface QueuedEditContext {
  readonly dialog: HTMLDialogElement;
  /** The text of a queued prompt, as the control stream last reported it. */
  queued(sessionId: string, itemId: string): string;
  save(sessionId: string, itemId: string, text: string): void;
  /** Text the operator wrote for a session that can no longer go where it was meant. */
  giveBack(sessionId: string, text: string): void;
  tell(text: string): void;
}

/**
 * The edit dialog of a queued prompt. The prompt may leave its queue while the dialog is open (its
 * turn starts, another tab sends it now or removes it): the dialog then closes rather than go on
 * offering to edit a prompt that is no longer queued, says so, and an edit already typed goes to
 * the composer instead of being lost to a refused save.
 */
export class QueuedPromptEdit {
  private open: { sessionId: string; itemId: string; stop: AbortController } | undefined;

  constructor(private readonly ctx: QueuedEditContext) {}

  edit(sessionId: string, itemId: string): void {
    const text = this.ctx.queued(sessionId, itemId);
    const editing = { sessionId, itemId, stop: new AbortController() };
    this.open = editing;
    const input = this.ctx.dialog.querySelector("input")!;
    let typed = text;
    editing.stop.signal.addEventListener("abort", () => (typed = input.value));
    void askText(this.ctx.dialog, "Edit queued prompt", text, editing.stop.signal).then((edited) => {
      if (this.open === editing) this.open = undefined;
      if (!editing.stop.signal.aborted) {
        if (edited !== null) this.ctx.save(sessionId, itemId, edited);
        return;
      }
      // handed over once the dialog has closed and given the focus back
      const changed = typed.trim() !== "" && typed !== text;
      if (changed) this.ctx.giveBack(sessionId, typed);
      this.ctx.tell(
        `The queued prompt left the queue (it started, or another tab sent or removed it) before the edit was saved${
          changed ? "; your edited text is in the composer." : "."
        }`,
      );
    });
  }

  /** The queues as the live control stream reports them now (never a last known copy). */
  queuesChanged(queues: Readonly<Record<string, readonly QueueItem[]>>): void {
    const editing = this.open;
    if (!editing || queues[editing.sessionId]?.some((q) => q.itemId === editing.itemId)) return;
    this.open = undefined;
    editing.stop.abort();
  }
}
