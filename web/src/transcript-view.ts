import {
  elementScroll,
  observeElementOffset,
  observeElementRect,
  measureElement as readElementSize,
  Virtualizer,
} from "@tanstack/virtual-core";
import { html, render, type TemplateResult } from "lit-html";
import { guard } from "lit-html/directives/guard.js";
import { repeat } from "lit-html/directives/repeat.js";
import type { TranscriptState } from "../../protocol/transcript.js";
import type { OlderEvents } from "./session-model.js";
import { type TranscriptRow, transcriptRows } from "./transcript-rows.js";
import { type RowContext, rowTemplate } from "./transcript-templates.js";

/** Within this many pixels of the end, the view counts as following the latest output. */
const PINNED_PX = 80;
const PADDING_PX = 20;
/** Room at the top for the line that offers (or reads) the older part of the log. */
const OLDER_LINE_PX = 56;
/** Within this many pixels of the start, the older part of the log is read. */
const NEAR_START_PX = 800;
/** Rows drawn beyond each edge of the viewport, so a fast scroll rarely shows a blank band. */
const OVERSCAN = 6;
/** Pixels of a bubble line, and characters a line holds at the transcript's width (15 px text, 760 px column). */
const LINE_PX = 22;
const LINE_CHARS = 85;

/**
 * A row's height before it is measured, from its text. The closer the guess, the less the view
 * shifts when the row is measured as it scrolls into range.
 */
function estimateHeight(row: TranscriptRow | undefined): number {
  if (!row || row.kind === "turn-flag") return 50;
  const lines = (text: string) => Math.max(1, Math.ceil(text.length / LINE_CHARS)) * LINE_PX;
  // Role label, row gap, and per bubble its padding.
  if (row.kind === "user") return 40 + 22 + lines(row.msg.text);
  let height = 40;
  for (const s of row.msg.segments)
    height += s.kind === "text" ? 30 + lines(s.text) : s.kind === "tool" || s.kind === "job" ? 50 : 140;
  return height;
}

/** What a row's drawing depends on; the row is redrawn only when one of these changed. */
function rowInputs(row: TranscriptRow, ctx: RowContext): unknown[] {
  if (row.kind === "assistant")
    return [
      row.msg,
      row.streaming,
      row.pending.join(","),
      row.turnEnded,
      ctx.actionable,
      row.pending.filter((id) => ctx.answered.has(id)).join(","),
      row.forkCutJobs.join(","),
    ];
  return row.kind === "user" ? [row.msg] : [row.turn, row.forkCut];
}

/**
 * Draws a transcript into its scroll container. Only the rows in and near the viewport exist in
 * the DOM (TanStack Virtual measures each drawn row, lit-html's keyed `repeat` keeps a row's
 * element while it stays in range), so a session of any length costs the same to draw.
 *
 * The view follows the live answer while the person is at the end; once they scroll up it stays
 * where they are and offers "jump to latest". A transcript that holds only the newest part of its
 * log asks for the older part (`onNearStart`) as the person nears its start, or presses the line
 * there; rows put in front leave the rows in view where they were.
 */
export class TranscriptView {
  private readonly virtualizer: Virtualizer<HTMLElement, HTMLElement>;
  private rows: TranscriptRow[] = [];
  private state: TranscriptState | undefined;
  private ctx: RowContext = { actionable: true, answered: new Set() };
  private older: OlderEvents = "none";
  /** The rows begin inside a turn whose start (its prompt) is not held yet. */
  private turnStartMissing = false;
  /** The turn whose first row is brought to the top of the view once it is drawn. */
  private revealTurn: string | undefined;
  private pinned = true;
  private frame = 0;
  private drawing = false;
  /** The first row in view and how far into it the view starts: kept in place across a redraw. */
  private anchor: { key: string; offset: number } | undefined;

  constructor(
    private readonly container: HTMLElement,
    private readonly jumpButton: HTMLButtonElement,
    /** `pressed`: the person asked with the line's button, rather than by scrolling near it. */
    private readonly onNearStart: (pressed: boolean) => void,
  ) {
    this.virtualizer = new Virtualizer<HTMLElement, HTMLElement>({
      count: 0,
      getScrollElement: () => container,
      estimateSize: (i) => estimateHeight(this.rows[i]),
      getItemKey: (i) => this.rows[i]?.key ?? i,
      overscan: OVERSCAN,
      paddingStart: PADDING_PX,
      paddingEnd: PADDING_PX,
      scrollToFn: elementScroll,
      observeElementRect,
      observeElementOffset,
      measureElement: readElementSize,
      // Scrolling and re-measured rows change which rows are drawn and where. A scroll is drawn at
      // once, in the same frame, so a fast scroll never shows a band without rows.
      onChange: (_, scrolling) => {
        if (scrolling && !this.drawing) this.draw();
        else this.schedule();
      },
    });
    this.virtualizer._didMount();
    container.addEventListener(
      "scroll",
      () => {
        this.pinned = this.distanceFromEnd() < PINNED_PX;
        this.jumpButton.hidden = this.pinned;
        this.askOlderNearStart();
      },
      { passive: true },
    );
    jumpButton.addEventListener("click", () => this.jumpToLatest());
    container.addEventListener("click", (e) => {
      if ((e.target as HTMLElement).closest('[data-action="older-events"]')) this.onNearStart(true);
    });
  }

  render(
    state: TranscriptState,
    ctx: RowContext,
    older: OlderEvents = "none",
    turnStartMissing = false,
  ): void {
    if (
      state === this.state &&
      ctx.actionable === this.ctx.actionable &&
      ctx.answered === this.ctx.answered &&
      older === this.older &&
      turnStartMissing === this.turnStartMissing
    )
      return;
    const grown = state !== this.state;
    if (grown) {
      this.anchor = this.pinned ? undefined : this.firstInView();
      this.rows = transcriptRows(state);
      this.takeRevealedTurn();
    }
    this.state = state;
    this.ctx = ctx;
    this.older = older;
    this.turnStartMissing = turnStartMissing;
    this.draw();
    // Rows that still leave the view near the start (a short tail) ask for more; a read that
    // failed changed no rows, and is asked again only by the person (a scroll, the button).
    if (grown) this.askOlderNearStart();
  }

  /**
   * Brings the first row of turn `turnId` (its prompt) to the top of the view once the rows hold
   * it: the start of a turn the view began inside, read on the person's request. Called once
   * the model holds the new rows, before they are drawn.
   */
  reveal(turnId: string): void {
    // taken at the next render with new rows: the ones the turn's start was read into
    this.revealTurn = turnId;
  }

  private takeRevealedTurn(): void {
    const turnId = this.revealTurn;
    if (turnId === undefined) return;
    const row = this.rows.find((r) => (r.kind === "turn-flag" ? r.turn.turnId : r.msg.turnId) === turnId);
    if (!row) return;
    this.revealTurn = undefined;
    this.pinned = false;
    this.jumpButton.hidden = false;
    this.anchor = { key: row.key, offset: 0 };
  }

  /** Another session is shown: start at its end. */
  clear(): void {
    this.state = undefined;
    this.older = "none";
    this.turnStartMissing = false;
    this.revealTurn = undefined;
    this.anchor = undefined;
    this.rows = [];
    this.pinned = true;
    this.jumpButton.hidden = true;
    // Row sizes are kept by row key: drop the last session's so the map stays bounded.
    this.virtualizer.measure();
    this.draw();
  }

  jumpToLatest(): void {
    this.pinned = true;
    this.jumpButton.hidden = true;
    this.draw();
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  /** Near the start (or with nothing to scroll) while the log goes back further: read more of it. */
  private askOlderNearStart(): void {
    if (this.older === "more" && this.state !== undefined && this.container.scrollTop < NEAR_START_PX)
      this.onNearStart(false);
  }

  private firstInView(): { key: string; offset: number } | undefined {
    const top = this.container.scrollTop;
    const item = this.virtualizer.getVirtualItems().find((i) => i.end > top);
    return item ? { key: String(item.key), offset: top - item.start } : undefined;
  }

  private distanceFromEnd(): number {
    const c = this.container;
    return c.scrollHeight - c.scrollTop - c.clientHeight;
  }

  /**
   * What the line at the top says: inside a turn whose start is not held, that the turn's prompt
   * is above and a press reads back to it (not just a page), rather than a bare "earlier messages".
   */
  private olderLine(older: OlderEvents): TemplateResult {
    const loading = older === "loading";
    if (!this.turnStartMissing)
      return html`<button type="button" class="link-button" data-action="older-events" ?disabled=${loading}>
        ${loading ? "Loading earlier messages…" : "Show earlier messages"}</button>`;
    return html`<span class="turn-start-missing" data-testid="turn-start-missing">This turn's prompt is not loaded yet.</span>
      <button type="button" class="link-button" data-action="older-events" ?disabled=${loading}>
        ${loading ? "Loading the start of this turn…" : "Show the start of this turn"}</button>`;
  }

  private draw(): void {
    this.drawing = true;
    try {
      this.drawRows();
    } finally {
      this.drawing = false;
    }
  }

  private drawRows(): void {
    const v = this.virtualizer;
    const rows = this.rows;
    const ctx = this.ctx;
    const older = this.older;
    v.setOptions({
      ...v.options,
      count: rows.length,
      paddingStart: older === "none" ? PADDING_PX : OLDER_LINE_PX,
    });
    v._willUpdate();
    const totalSize = v.getTotalSize();
    // rows put in front (older pages) or grown above: the row that was in view stays in view
    const anchor = this.anchor;
    this.anchor = undefined;
    const index = anchor ? rows.findIndex((row) => row.key === anchor.key) : -1;
    const start = index >= 0 ? v.measurementsCache[index]?.start : undefined;
    const keep = start !== undefined && anchor ? start + anchor.offset : undefined;
    const items = v.getVirtualItems();
    render(
      html`<div class="transcript-space" style="height:${totalSize}px">
        ${
          older === "none"
            ? null
            : html`<div class="transcript-older" data-testid="older-events" data-state=${older}>
              ${this.olderLine(older)}</div>`
        }
        ${repeat(
          items,
          (item) => item.key,
          (item) => {
            const row = rows[item.index]!;
            return html`<div class="transcript-row" data-index=${item.index} data-key=${row.key}
              style="transform:translateY(${item.start}px)">
              ${guard(rowInputs(row, ctx), () => rowTemplate(row, ctx))}
            </div>`;
          },
        )}
      </div>`,
      this.container,
    );
    if (keep !== undefined && Math.abs(this.container.scrollTop - keep) > 1) {
      this.container.scrollTop = keep;
      // told now, not at the next frame's scroll event: the rows measured below adjust the scroll
      // from the virtualizer's own offset, and the one it had would undo this
      this.container.dispatchEvent(new Event("scroll"));
    }
    for (const el of this.container.querySelectorAll<HTMLElement>(".transcript-row")) v.measureElement(el);
    if (this.pinned && this.distanceFromEnd() > 1) {
      this.container.scrollTop = this.container.scrollHeight;
    }
  }
}
