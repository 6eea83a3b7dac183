import type { Job, QueueItem } from "../../protocol/index.js";
import type { ConnectionState } from "../../src/client/index.js";
import { h } from "./element-builder.js";

/** Background jobs of the shown session, each with a progress bar. */
export function renderJobs(container: HTMLElement, jobs: readonly Job[]): void {
  container.replaceChildren(
    ...jobs.map((job) => {
      const percent = Math.round(job.progress * 100);
      return h(
        "div",
        { class: "job", "data-testid": "job", "data-job-id": job.jobId, "data-state": job.state },
        h("span", { class: "job-label" }, job.label),
        h(
          "span",
          { class: "job-percent", "data-testid": "job-percent" },
          job.state === "running" ? `${percent}%` : job.state,
        ),
        h(
          "div",
          {
            class: "job-bar",
            role: "progressbar",
            "aria-valuemin": 0,
            "aria-valuemax": 100,
            "aria-valuenow": percent,
          },
          h("span", { style: `width:${percent}%` }),
        ),
      );
    }),
  );
}

/** Prompts waiting behind the running turn, with edit, remove and steer (deliver now as an interjection). */
export function renderQueue(container: HTMLElement, items: readonly QueueItem[]): void {
  if (items.length === 0) {
    container.replaceChildren();
    return;
  }
  container.replaceChildren(
    h("div", { class: "list-heading" }, `Queued (${items.length})`),
    ...items.map((q) =>
      h(
        "div",
        { class: "queue-item", "data-testid": "queue-item", "data-item-id": q.itemId },
        h("span", { class: "queue-text" }, q.text),
        h(
          "button",
          {
            "data-action": "queue-steer",
            "data-item-id": q.itemId,
            title: "Send now, into the running turn",
          },
          "Steer",
        ),
        h("button", { "data-action": "queue-edit", "data-item-id": q.itemId }, "Edit"),
        h("button", { "data-action": "queue-remove", "data-item-id": q.itemId }, "Remove"),
      ),
    ),
  );
}

/** The text of the connection indicator; a backoff shows the seconds until the next attempt. */
export function connectionLabel(state: ConnectionState, now: number): string {
  switch (state.name) {
    case "open":
      return "Connected";
    case "connecting":
      return state.attempt === 0 ? "Connecting…" : "Reconnecting…";
    case "backoff": {
      const seconds = Math.max(0, Math.ceil((state.nextAttemptAt - now) / 1000));
      return `Offline · retrying in ${seconds}s`;
    }
    case "closed":
      return "Disconnected";
  }
}
