import { html, nothing, render, type TemplateResult } from "lit-html";
import { repeat } from "lit-html/directives/repeat.js";
import type { SessionRow } from "../../protocol/index.js";
import { LAST_KNOWN_TITLE } from "./last-known.js";
import { type ListPosition, orderSessions } from "./session-list-order.js";

const STATE_LABEL: Record<SessionRow["lastState"], string> = {
  idle: "new",
  working: "working",
  "input-required": "needs you",
  completed: "done",
  failed: "failed",
  cancelled: "cancelled",
  interrupted: "interrupted",
};

export const rowTitle = (row: Pick<SessionRow, "title" | "sessionId">): string =>
  row.title || "Untitled session";

/** Short relative time for list rows ("now", "5m", "3h", "2d", then a date). */
export function relativeTime(at: number, now: number): string {
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 45) return "now";
  if (s < 3600) return `${Math.round(s / 60)}m`;
  if (s < 86_400) return `${Math.round(s / 3600)}h`;
  if (s < 7 * 86_400) return `${Math.round(s / 86_400)}d`;
  return new Date(at).toLocaleDateString();
}

/** Ticks every 15 s: the list is drawn again at each tick, so a row's age never sits at "now". */
export const listClock = (): number => Math.floor(Date.now() / 15_000);

/** Which sessions the list shows: the principal's list, or those they dismissed. */
export type ListView = "list" | "dismissed";

/** The row's own button: take it off the list (it keeps running), or put it back. */
function rowAction(row: SessionRow, view: ListView): TemplateResult {
  return view === "list"
    ? html`<button type="button" class="row-action" data-testid="dismiss-session" data-action="dismiss"
        title="Keep running, remove from my list" aria-label=${`Dismiss ${rowTitle(row)}`}>×</button>`
    : html`<button type="button" class="row-action" data-testid="restore-session" data-action="restore"
        title="Put back on my list" aria-label=${`Restore ${rowTitle(row)}`}>↩</button>`;
}

function item(
  row: SessionRow,
  selected: boolean,
  now: number,
  view: ListView,
  stale: boolean,
): TemplateResult {
  const state = row.lastState === "input-required" || !row.running ? row.lastState : "working";
  return html`<li class="session-item" data-testid="session-item" data-session-id=${row.sessionId}
    data-state=${row.lastState} aria-current=${selected ? "true" : nothing} tabindex="0">
    ${rowAction(row, view)}
    <span class="row-title" data-testid="session-item-title" dir="auto">${rowTitle(row)}</span>
    <span class="row-meta">
      <span class="state-pill" data-state=${state}
        data-stale=${stale ? "true" : nothing} title=${stale ? LAST_KNOWN_TITLE : nothing}>${STATE_LABEL[state]}</span>
      <span>${row.turnCount} turn${row.turnCount === 1 ? "" : "s"}</span><span>·</span>
      <span data-testid="session-item-age" title=${new Date(row.updatedAt).toLocaleString()}>${relativeTime(row.updatedAt, now)}</span>
    </span>
  </li>`;
}

const heading = (text: string) => html`<li class="list-heading">${text}</li>`;

/** How far the list is loaded: `end` is where the loaded pages stop while older ones exist. */
export interface ListPaging {
  end: ListPosition | undefined;
  /** The host has older pages: the list ends with the button that reads the next one. */
  more: boolean;
  /** The next older page is being read. */
  loading: boolean;
  /** Calls can reach the host. */
  online: boolean;
  /** How many sessions waiting on you are pinned, whether more wait than are shown, and whether more are being read. */
  pinned?: { limit: number; more: boolean; loading: boolean };
}

/** The button at the end of a list that has older pages: a plain button, so Tab and Enter reach it. */
const olderButton = (paging: ListPaging) =>
  html`<li class="list-more"><button type="button" class="link-button" data-testid="older-sessions"
    data-action="older" ?disabled=${paging.loading || !paging.online}
    aria-busy=${paging.loading ? "true" : nothing}>${paging.loading ? "Loading older sessions…" : "Show older sessions"}</button></li>`;

/** The button under the pinned sessions when more wait on you than are shown. */
const morePinnedButton = (paging: ListPaging) =>
  html`<li class="list-more"><button type="button" class="link-button" data-testid="more-waiting"
    data-action="more-pinned" ?disabled=${paging.pinned?.loading || !paging.online}
    aria-busy=${paging.pinned?.loading ? "true" : nothing}>${paging.pinned?.loading ? "Loading more sessions waiting on you…" : "Show more sessions waiting on you"}</button></li>`;

/**
 * Draws the session list: parked sessions pinned under their own heading (with a button for more
 * when more wait than are pinned), then the newest, as
 * far as the pages loaded reach, then a button for the next older page. The dismissed view lists
 * the dismissed sessions newest first, each with its restore button, paged the same way. `stale`: the console cannot
 * confirm the rows' states (offline, no live state yet), so each is marked last known.
 */
export function renderSessionList(
  list: HTMLElement,
  rows: Iterable<SessionRow>,
  selected: string | undefined,
  view: ListView = "list",
  stale = false,
  paging: ListPaging = { end: undefined, more: false, loading: false, online: true },
): void {
  const now = Date.now();
  const items = (group: SessionRow[]) =>
    repeat(
      group,
      (row) => row.sessionId,
      (row) => item(row, row.sessionId === selected, now, view, stale),
    );
  if (view === "dismissed") {
    // nothing pinned: waiting on you or not, dismissed sessions are listed newest first
    const { recent } = orderSessions(rows, paging.end, 0);
    render(
      html`${heading(recent.length > 0 ? "Dismissed, still running" : "No dismissed sessions")}${items(recent)}
        ${paging.more ? olderButton(paging) : nothing}`,
      list,
    );
    return;
  }
  const { pinned, recent } = orderSessions(rows, paging.end, paging.pinned?.limit);
  render(
    html`${pinned.length > 0 ? html`${heading("Waiting on you")}${items(pinned)}` : nothing}
      ${paging.pinned?.more ? morePinnedButton(paging) : nothing}
      ${pinned.length > 0 && recent.length > 0 ? heading("Recent") : nothing}${items(recent)}
      ${pinned.length + recent.length === 0 ? heading("No sessions yet") : nothing}
      ${paging.more ? olderButton(paging) : nothing}`,
    list,
  );
}

export interface SearchHit {
  sessionId: string;
  seq: number;
  snippet: string;
}

/**
 * A hit's snippet with its matched words marked: the host puts each between `**` and `**`
 * (protocol-v1 §4, `session.search`). A `**` left without its pair is shown as written.
 */
export function markedSnippet(snippet: string): (string | TemplateResult)[] {
  const parts = snippet.split("**");
  const unpaired = parts.length % 2 === 0 ? `**${parts.pop()}` : undefined;
  const marked: (string | TemplateResult)[] = parts.map((part, i) =>
    i % 2 === 1 ? html`<mark>${part}</mark>` : part,
  );
  if (unpaired !== undefined) marked.push(unpaired);
  return marked;
}

export function renderSearchHits(
  list: HTMLElement,
  hits: SearchHit[] | undefined,
  titleOf: (sessionId: string) => string,
  /** Why there are no hits, when the host answered none to show (a query too broad, a failure). */
  note?: string,
): void {
  list.hidden = hits === undefined;
  render(
    hits === undefined
      ? nothing
      : html`${heading("Search results")}
          ${hits.length === 0 ? heading(note ?? "No matches") : nothing}
          ${hits.map(
            (hit) => html`<li class="session-item" data-testid="search-hit" data-session-id=${hit.sessionId}
              tabindex="0">
              <span class="row-title" dir="auto">${titleOf(hit.sessionId)}</span>
              <span class="hit-snippet" data-testid="hit-snippet" dir="auto">${markedSnippet(hit.snippet)}</span>
            </li>`,
          )}`,
    list,
  );
}
