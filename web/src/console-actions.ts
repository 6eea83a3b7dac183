import type { ConsoleElements } from "./console-elements.js";
import type { ConsoleLink } from "./console-link.js";
import type { QueuedPromptEdit } from "./queued-prompt-edit.js";
import type { SessionModel } from "./session-model.js";

/** What the handlers of cards, queued prompts and keys need from the console. */
export interface ActionContext {
  readonly el: ConsoleElements;
  readonly link: ConsoleLink;
  session(): SessionModel | undefined;
  readonly queuedEdit: QueuedPromptEdit;
  /** Runs a call, reporting a failure instead of throwing into an event handler. */
  run(what: string, work: () => Promise<unknown>): void;
  /** Sends the answer to an interaction; its card takes no other until the host refuses this one. */
  answer(interactionId: string, response: { outcome: "approve" | "deny" } | { answer: string }): void;
  search(query: string): void;
}

/** Approve, deny or answer from an interaction card. */
export function answerCard(ctx: ActionContext, target: HTMLElement): void {
  const button = target.closest<HTMLButtonElement>("button[data-action]");
  const id = button?.dataset.interactionId;
  if (!button || !id || button.disabled) return;
  const action = button.dataset.action;
  if (action === "approve" || action === "deny") {
    ctx.answer(id, { outcome: action });
  } else if (action === "answer" || action === "answer-option") {
    const input = button.closest(".card")?.querySelector<HTMLInputElement>("input");
    const answer = action === "answer-option" ? (button.dataset.answer ?? "") : (input?.value ?? "");
    if (answer.trim() === "") {
      input?.focus();
      return;
    }
    ctx.answer(id, { answer });
  }
}

/** Steer, edit or remove a queued prompt. */
export function queueAction(ctx: ActionContext, target: HTMLElement): void {
  const button = target.closest<HTMLButtonElement>("button[data-action]");
  const itemId = button?.dataset.itemId;
  const s = ctx.session();
  if (!button || !itemId || !s || button.disabled) return;
  s.touch();
  const action = button.dataset.action;
  if (action === "queue-steer") ctx.run("Steer", () => ctx.link.steer(s.sessionId, itemId));
  if (action === "queue-remove") ctx.run("Remove", () => ctx.link.removeQueued(s.sessionId, itemId));
  if (action === "queue-edit") ctx.queuedEdit.edit(s.sessionId, itemId);
}

/**
 * Keys beyond what the elements do by themselves: Enter in a question's answer box answers it;
 * Escape closes what is open over the page (the narrow-screen session list, then search results).
 * The text dialog closes on Escape natively.
 */
export function bindKeyboard(ctx: ActionContext): void {
  const el = ctx.el;
  el.transcript.addEventListener("keydown", (e) => {
    const input = e.target as HTMLElement;
    if (e.key !== "Enter" || e.isComposing || input.dataset.testid !== "answer-input") return;
    e.preventDefault();
    const answer = input.closest(".card")?.querySelector<HTMLButtonElement>('button[data-action="answer"]');
    if (answer) answerCard(ctx, answer);
  });
  addEventListener("keydown", (e) => {
    if (e.key !== "Escape" || el.textDialog.open) return;
    if (el.app.classList.contains("sidebar-open")) {
      el.app.classList.remove("sidebar-open");
      el.toggleSidebar.focus();
    } else if (document.activeElement === el.search && el.search.value !== "") {
      el.search.value = "";
      ctx.search("");
    }
  });
}
