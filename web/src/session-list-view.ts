import type { SessionRow } from "../../protocol/index.js";
import { h, relativeTime } from "./element-builder.js";
import { orderSessions } from "./session-list-order.js";

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

function item(row: SessionRow, selected: boolean, now: number): HTMLElement {
  const state = row.lastState === "input-required" || !row.running ? row.lastState : "working";
  return h(
    "li",
    {
      class: "session-item",
      "data-testid": "session-item",
      "data-session-id": row.sessionId,
      "data-state": row.lastState,
      "aria-current": selected ? "true" : undefined,
      tabindex: 0,
    },
    h("span", { class: "row-title", "data-testid": "session-item-title" }, rowTitle(row)),
    h(
      "span",
      { class: "row-meta" },
      h("span", { class: "state-pill", "data-state": state }, STATE_LABEL[state]),
      h("span", {}, `${row.turnCount} turn${row.turnCount === 1 ? "" : "s"}`),
      h("span", {}, "·"),
      h("span", { title: new Date(row.updatedAt).toLocaleString() }, relativeTime(row.updatedAt, now)),
    ),
  );
}

/** Draws the session list: parked sessions pinned under their own heading, then the newest. */
export function renderSessionList(
  list: HTMLElement,
  rows: Iterable<SessionRow>,
  selected: string | undefined,
): void {
  const { pinned, recent } = orderSessions(rows);
  const now = Date.now();
  const children: HTMLElement[] = [];
  if (pinned.length > 0) {
    children.push(h("li", { class: "list-heading" }, "Waiting on you"));
    for (const row of pinned) children.push(item(row, row.sessionId === selected, now));
    if (recent.length > 0) children.push(h("li", { class: "list-heading" }, "Recent"));
  }
  for (const row of recent) children.push(item(row, row.sessionId === selected, now));
  if (children.length === 0) children.push(h("li", { class: "list-heading" }, "No sessions yet"));
  list.replaceChildren(...children);
}

export interface SearchHit {
  sessionId: string;
  seq: number;
  snippet: string;
}

export function renderSearchHits(
  list: HTMLElement,
  hits: SearchHit[] | undefined,
  titleOf: (sessionId: string) => string,
): void {
  list.hidden = hits === undefined;
  if (!hits) {
    list.replaceChildren();
    return;
  }
  const children =
    hits.length === 0
      ? [h("li", { class: "list-heading" }, "No matches")]
      : hits.map((hit) =>
          h(
            "li",
            {
              class: "session-item",
              "data-testid": "search-hit",
              "data-session-id": hit.sessionId,
              tabindex: 0,
            },
            h("span", { class: "row-title" }, titleOf(hit.sessionId)),
            h("span", { class: "hit-snippet" }, hit.snippet),
          ),
        );
  list.replaceChildren(h("li", { class: "list-heading" }, "Search results"), ...children);
}
