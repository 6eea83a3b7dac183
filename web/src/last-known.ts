/** The tooltip of whatever shows live state the console could not confirm: kept for context, never current. */
export const LAST_KNOWN_TITLE = "Last known state: the console is not connected to the host";

/** Marks a badge drawn outside lit-html as last known (`data-stale`), or clears the mark. */
export function markStale(badge: HTMLElement, stale: boolean): void {
  if (stale) {
    badge.dataset.stale = "true";
    badge.title = LAST_KNOWN_TITLE;
  } else {
    delete badge.dataset.stale;
    badge.removeAttribute("title");
  }
}
