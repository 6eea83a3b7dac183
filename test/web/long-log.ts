import type { Page } from "playwright-core";
import type { SessionEvent } from "../../protocol/index.js";
import { followSession } from "../../src/client/index.js";
import type { SessionmuxClient } from "../../src/client/node.js";

/**
 * Fills a session turn by turn, each prompt `prompt(turn)` (a demo agent command), until its log
 * holds `target` events or `maxTurns` turns ran; returns the log's head and the turns run.
 */
export async function seedLog(
  client: SessionmuxClient,
  sessionId: string,
  { target, maxTurns, prompt }: { target: number; maxTurns: number; prompt: (turn: number) => string },
): Promise<{ head: number; turns: number }> {
  let head = 0;
  let turnsEnded = 0;
  let wake: (() => void) | undefined;
  const sub = followSession(client, sessionId, { afterSeq: 0 }).subscribe((update) => {
    if (update.kind !== "events") return;
    for (const event of update.events as SessionEvent[]) {
      head = event.seq;
      if (event.type === "turn/end") turnsEnded += 1;
    }
    wake?.();
  });
  try {
    let turn = 0;
    while (turn < maxTurns && head < target) {
      turn += 1;
      await client.prompt({ sessionId, text: prompt(turn) });
      while (turnsEnded < turn) await new Promise<void>((resolve) => (wake = resolve));
    }
    return { head, turns: turn };
  } finally {
    sub.unsubscribe();
  }
}

/** What `readBackToStart` saw: the prompts' seqs on top of the view, and any drawn out of order. */
export interface ReadBack {
  topSeqs: number[];
  outOfOrder: number[][];
}

/**
 * Scrolls the shown transcript to its start again and again, while the console holds only the
 * newer part of the log, until it holds all of it (the line offering earlier messages is gone).
 * Checks at each step that the prompts drawn are in log order.
 */
export async function readBackToStart(page: Page, timeout: number): Promise<ReadBack> {
  await page.evaluate(() => {
    (window as { readBack?: ReadBack }).readBack = { topSeqs: [], outOfOrder: [] };
  });
  await page.waitForFunction(
    () => {
      const seen = (window as { readBack?: ReadBack }).readBack!;
      const view = document.querySelector<HTMLElement>('[data-testid="transcript"]')!;
      const rows = [...view.querySelectorAll<HTMLElement>(".transcript-row")].sort(
        (a, b) => Number(a.dataset.index) - Number(b.dataset.index),
      );
      const seqs = rows.flatMap((row) =>
        [...row.querySelectorAll<HTMLElement>('[data-testid="user-message"]')].map((m) =>
          Number(m.dataset.seq),
        ),
      );
      if (seqs.some((seq, i) => i > 0 && seq <= seqs[i - 1]!)) seen.outOfOrder.push(seqs);
      if (seqs.length > 0 && seqs[0] !== seen.topSeqs[seen.topSeqs.length - 1]) seen.topSeqs.push(seqs[0]!);
      const line = document.querySelector<HTMLElement>('[data-testid="older-events"]');
      // done once all of it is held and the view is at its start; scrolled there while there is more
      if (!line && view.scrollTop === 0) return true;
      if (!line || line.dataset.state === "more") view.scrollTop = 0;
      return false;
    },
    undefined,
    { polling: 100, timeout },
  );
  return page.evaluate(() => (window as { readBack?: ReadBack }).readBack!);
}
