import { VISIBLE_TEXT_PATTERN } from "../../protocol/visible-text.js";

/**
 * What the dialog's input must match to be saved: the host's rule for a title or a queued
 * prompt's text, at least one visible character (an `<input pattern>` matches the whole value).
 */
const SAVABLE = `[\\s\\S]*${VISIBLE_TEXT_PATTERN}[\\s\\S]*`;

/** Which opening of each dialog is the current one. */
const openings = new WeakMap<HTMLDialogElement, number>();

/**
 * Asks for one line of text in the page's modal `<dialog>`: Enter saves, Escape or Cancel closes
 * it, and the focus goes back where it was. Resolves with the text, or null when not saved.
 *
 * A dialog's `close` event is a task queued after it closed, so when the dialog is opened again
 * at once (Escape, then Enter on the button that opened it) the earlier closing's event can reach
 * the new opening. Each opening therefore answers only its own closing, and takes the text when
 * its form is submitted rather than from a `returnValue` a later opening may have reset.
 *
 * `until` closes the dialog unsaved when it aborts: what it asks about is no longer there.
 */
export function askText(
  dialog: HTMLDialogElement,
  title: string,
  value: string,
  until?: AbortSignal,
): Promise<string | null> {
  const heading = dialog.querySelector<HTMLElement>("[data-role=title]")!;
  const input = dialog.querySelector<HTMLInputElement>("input")!;
  const cancel = dialog.querySelector<HTMLButtonElement>("[data-role=cancel]")!;
  const form = dialog.querySelector<HTMLFormElement>("form")!;
  const opening = (openings.get(dialog) ?? 0) + 1;
  openings.set(dialog, opening);
  heading.textContent = title;
  input.pattern = SAVABLE;
  input.value = value;
  dialog.returnValue = "";
  const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  return new Promise((resolve) => {
    let saved: string | null = null;
    const current = () => openings.get(dialog) === opening;
    const onCancel = () => dialog.close("");
    const onAbort = () => {
      if (current() && dialog.open) dialog.close("");
    };
    const onSubmit = () => {
      if (current()) saved = input.value;
    };
    const onClose = () => {
      // the late close event of an earlier opening: this one is still open
      if (dialog.open && current()) return;
      cancel.removeEventListener("click", onCancel);
      until?.removeEventListener("abort", onAbort);
      form.removeEventListener("submit", onSubmit);
      dialog.removeEventListener("close", onClose);
      if (!dialog.open) opener?.focus();
      resolve(saved);
    };
    cancel.addEventListener("click", onCancel);
    until?.addEventListener("abort", onAbort);
    form.addEventListener("submit", onSubmit);
    dialog.addEventListener("close", onClose);
    dialog.showModal();
    input.select();
  });
}
