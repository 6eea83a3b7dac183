import type { Page } from "playwright-core";
import { expect } from "vitest";
import type { SessionmuxClient } from "../../src/client/node.js";

/** A bound on the pages a walk of the host's list reads (the tests hold at most a few hundred sessions). */
const MAX_PAGES = 10;

/** The host's list (or its dismissed sessions), newest first, read page by page with its cursor. */
export async function hostOrder(client: SessionmuxClient, dismissed = false): Promise<string[]> {
  const ids: string[] = [];
  let before: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const answer = await client.call("session.list", {
      limit: 50,
      ...(dismissed ? { dismissed: true as const } : {}),
      ...(before ? { before } : {}),
    });
    ids.push(...answer.sessions.map((row) => row.sessionId));
    before = answer.next;
    if (before === undefined) return ids;
  }
  throw new Error(`the list did not end within ${MAX_PAGES} pages`);
}

/** The session ids the console's list shows (the main list or the Dismissed view), top to bottom. */
export const listedSessions = (page: Page) =>
  page.$$eval('[data-testid="session-list"] [data-testid="session-item"]', (items) =>
    items.map((item) => item.getAttribute("data-session-id")),
  );

/** Two animation frames: what a live change or a scroll did is drawn by then. */
export const twoFrames = (page: Page) =>
  page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));

/**
 * Presses "Show older sessions" with the keyboard and waits for the page it brings. Focusing the
 * button scrolls the list to its end, which loads the page by itself (see the list's scroll
 * loading): a pointer click then waits for a button that went with it, so the press is by key, and
 * whichever of the two loads the page, the rows it brings are waited for.
 */
export async function showOlder(page: Page): Promise<void> {
  const before = (await listedSessions(page)).length;
  await page.focus('[data-testid="older-sessions"]');
  await page.keyboard.press("Enter");
  await expect.poll(async () => (await listedSessions(page)).length).toBeGreaterThan(before);
}
