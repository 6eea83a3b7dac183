import {
  elementScroll,
  observeElementOffset,
  observeElementRect,
  measureElement as readElementSize,
  Virtualizer,
} from "@tanstack/virtual-core";
import { html, render } from "lit-html";
import { guard } from "lit-html/directives/guard.js";
import { repeat } from "lit-html/directives/repeat.js";
import type { TranscriptState } from "../../protocol/transcript.js";
import { type TranscriptRow, transcriptRows } from "./transcript-rows.js";
import { type RowContext, rowTemplate } from "./transcript-templates.js";

/** Within this many pixels of the end, the view counts as following the latest output. */
const PINNED_PX = 80;
const PADDING_PX = 20;
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
    return [row.msg, row.streaming, row.pending.join(","), row.turnEnded, ctx.actionable];
  return [row.kind === "user" ? row.msg : row.turn];
}

/**
 * Draws a transcript into its scroll container. Only the rows in and near the viewport exist in
 * the DOM (TanStack Virtual measures each drawn row, lit-html's keyed `repeat` keeps a row's
 * element while it stays in range), so a session of any length costs the same to draw.
 *
 * The view follows the live answer while the person is at the end; once they scroll up it stays
 * where they are and offers "jump to latest".
 */
export class TranscriptView {
  private readonly virtualizer: Virtualizer<HTMLElement, HTMLElement>;
  private rows: TranscriptRow[] = [];
  private state: TranscriptState | undefined;
  private ctx: RowContext = { actionable: true };
  private pinned = true;
  private frame = 0;
  private drawing = false;

  constructor(
    private readonly container: HTMLElement,
    private readonly jumpButton: HTMLButtonElement,
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
      },
      { passive: true },
    );
    jumpButton.addEventListener("click", () => this.jumpToLatest());
  }

  render(state: TranscriptState, ctx: RowContext): void {
    if (state === this.state && ctx.actionable === this.ctx.actionable) return;
    if (state !== this.state) this.rows = transcriptRows(state);
    this.state = state;
    this.ctx = ctx;
    this.draw();
  }

  /** Another session is shown: start at its end. */
  clear(): void {
    this.state = undefined;
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

  private distanceFromEnd(): number {
    const c = this.container;
    return c.scrollHeight - c.scrollTop - c.clientHeight;
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
    v.setOptions({ ...v.options, count: rows.length });
    v._willUpdate();
    const items = v.getVirtualItems();
    render(
      html`<div class="transcript-space" style="height:${v.getTotalSize()}px">
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
    for (const el of this.container.querySelectorAll<HTMLElement>(".transcript-row")) v.measureElement(el);
    if (this.pinned && this.distanceFromEnd() > 1) {
      this.container.scrollTop = this.container.scrollHeight;
    }
  }
}
