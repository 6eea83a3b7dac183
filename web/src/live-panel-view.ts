import { html, nothing, render } from "lit-html";
import { repeat } from "lit-html/directives/repeat.js";
import type { Job, QueueItem } from "../../protocol/index.js";
import type { ConnectionState } from "../../src/client/index.js";
import { LAST_KNOWN_TITLE } from "./last-known.js";

/**
 * Background jobs of the shown session, each with a progress bar. `stale`: the console cannot
 * confirm them (offline), so each is marked last known rather than shown running as a fact.
 */
export function renderJobs(container: HTMLElement, jobs: readonly Job[], stale: boolean): void {
  render(
    repeat(
      jobs,
      (job) => job.jobId,
      (job) => {
        const percent = Math.round(job.progress * 100);
        return html`<div class="job" data-testid="job" data-job-id=${job.jobId} data-state=${job.state}
          data-stale=${stale ? "true" : nothing} title=${stale ? LAST_KNOWN_TITLE : nothing}>
          <span class="job-label" dir="auto">${job.label}</span>
          <span class="job-percent" data-testid="job-percent">${job.state === "running" ? `${percent}%` : job.state}</span>
          <div class="job-bar" role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow=${percent}>
            <span style="width:${percent}%"></span>
          </div>
        </div>`;
      },
    ),
    container,
  );
}

/**
 * Prompts waiting behind the running turn, with edit, remove and steer (deliver now as an
 * interjection). `actionable` is false while the console cannot reach the host. `steerBlocked`:
 * why no agent would take a steer now (the host refuses it), shown on the disabled Steer; edit
 * and remove stay offered. `stale`: the console cannot confirm them (offline, no live state), so
 * each is marked last known: one may have started or been changed elsewhere meanwhile.
 */
export function renderQueue(
  container: HTMLElement,
  items: readonly QueueItem[],
  actionable: boolean,
  steerBlocked: string | undefined,
  stale: boolean,
): void {
  const off = !actionable;
  render(
    items.length === 0
      ? nothing
      : html`<div class="list-heading">Queued (${items.length})</div>
          ${repeat(
            items,
            (q) => q.itemId,
            (q) => html`<div class="queue-item" data-testid="queue-item" data-item-id=${q.itemId}
              data-stale=${stale ? "true" : nothing} title=${stale ? LAST_KNOWN_TITLE : nothing}>
              <span class="queue-text" dir="auto">${q.text}</span>
              <button data-action="queue-steer" data-item-id=${q.itemId}
                title=${steerBlocked ?? "Send now, into the running turn"}
                ?disabled=${off || steerBlocked !== undefined}>Steer</button>
              <button data-action="queue-edit" data-item-id=${q.itemId} ?disabled=${off}>Edit</button>
              <button data-action="queue-remove" data-item-id=${q.itemId} ?disabled=${off}>Remove</button>
            </div>`,
          )}`,
    container,
  );
}

/**
 * The text of the connection indicator; a backoff shows the seconds until the next attempt, and
 * its cause: the token's principal holding the most sockets the host allows (429: other tabs or
 * clients with the same token), no network at all as the browser knows (`networkUp` false), or
 * else a host that cannot be reached.
 */
export function connectionLabel(state: ConnectionState, now: number, networkUp = true): string {
  switch (state.name) {
    case "open":
      return "Connected";
    case "connecting":
      return state.attempt === 0 ? "Connecting…" : "Reconnecting…";
    case "backoff": {
      const seconds = Math.max(0, Math.ceil((state.nextAttemptAt - now) / 1000));
      const cause = state.status === 429 ? "Too many connections" : networkUp ? "Offline" : "No network";
      return `${cause} · retrying in ${seconds}s`;
    }
    case "unauthorized":
      return state.status === 401 ? "Token refused" : "Origin refused";
    case "rejected":
      return `Refused (HTTP ${state.status})`;
    case "incompatible":
      return `Host speaks protocol ${state.protocol}`;
    case "closed":
      return "Disconnected";
  }
}
