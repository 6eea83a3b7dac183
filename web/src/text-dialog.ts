/**
 * Asks for one line of text in the page's modal `<dialog>`: Enter saves, Escape or Cancel closes
 * it, and the focus goes back where it was. Resolves with the text, or null when not saved.
 */
export function askText(dialog: HTMLDialogElement, title: string, value: string): Promise<string | null> {
  const heading = dialog.querySelector<HTMLElement>("[data-role=title]")!;
  const input = dialog.querySelector<HTMLInputElement>("input")!;
  const cancel = dialog.querySelector<HTMLButtonElement>("[data-role=cancel]")!;
  heading.textContent = title;
  input.value = value;
  dialog.returnValue = "";
  const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  return new Promise((resolve) => {
    const onCancel = () => dialog.close("");
    cancel.addEventListener("click", onCancel);
    dialog.addEventListener(
      "close",
      () => {
        cancel.removeEventListener("click", onCancel);
        opener?.focus();
        resolve(dialog.returnValue === "save" ? input.value : null);
      },
      { once: true },
    );
    dialog.showModal();
    input.select();
  });
}
