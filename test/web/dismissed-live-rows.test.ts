import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import type { SessionmuxClient } from "../../src/client/node.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";

/** More than one page of the Dismissed view (50), so its oldest sessions are on a page not loaded. */
const DISMISSED = 60;
/** The oldest dismissed sessions wait on an approval: parked, they would be pinned on the list. */
const PARKED = 3;
const LISTED = 5;
const MAX_PAGES = 10;

/** The host's list (or its dismissed sessions), newest first, read page by page with its cursor. */
async function hostOrder(client: SessionmuxClient, dismissed = false): Promise<string[]> {
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

const listed = (page: Page) =>
  page.$$eval('[data-testid="session-list"] [data-testid="session-item"]', (items) =>
    items.map((item) => item.getAttribute("data-session-id")),
  );

/** Two frames: what the live state changed is drawn by then. */
const frames = (page: Page) =>
  page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));

describe.skipIf(!hasChromium)("browser console: live rows of dismissed sessions on a page not loaded", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("keeps them off the list until their dismissed page is loaded, then in the Dismissed view", async () => {
    const { client } = fixture;
    const dismissed: string[] = [];
    for (let i = 1; i <= DISMISSED; i++) {
      const { sessionId } = (await client.call("session.create", { title: `Dismissed ${i}` })).header;
      // live state of its own: the control stream describes it to every tab of its owner
      if (i <= PARKED) await client.prompt({ sessionId, text: "/approve deploy" });
      await client.call("session.dismiss", { sessionId });
      dismissed.push(sessionId);
    }
    for (let i = 1; i <= LISTED; i++) await client.call("session.create", { title: `Listed ${i}` });
    const order = await hostOrder(client);
    const dismissedOrder = await hostOrder(client, true);
    expect(order).toHaveLength(LISTED);
    expect(dismissedOrder).toHaveLength(DISMISSED);
    // the parked ones are the oldest dismissed: past the Dismissed view's first page
    expect(dismissedOrder.slice(50)).toEqual(expect.arrayContaining(dismissed.slice(0, PARKED)));

    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    // the control stream's baseline has come: the rows' states are no longer marked last known
    await page.waitForSelector('[data-testid="session-item"] .state-pill:not([data-stale])');
    // a rename by another client of a dismissed session on a page not loaded: a live row of it
    const renamed = dismissedOrder.at(-5)!;
    await client.call("session.rename", { sessionId: renamed, title: "Renamed while dismissed" });
    await expect
      .poll(async () => (await client.call("session.page", { sessionId: renamed })).header.title)
      .toBe("Renamed while dismissed");
    await frames(page);
    expect(await listed(page)).toEqual(order);
    expect(await page.$('.list-heading:has-text("Waiting on you")')).toBe(null);

    // the Dismissed view pages to them, each once and in the host's order
    await page.click('[data-testid="show-dismissed"]');
    await expect.poll(() => listed(page)).toEqual(dismissedOrder.slice(0, 50));
    await page.click('[data-testid="older-sessions"]');
    await expect.poll(() => listed(page)).toEqual(dismissedOrder);
    expect(await page.textContent(`[data-session-id="${renamed}"] [data-testid="session-item-title"]`)).toBe(
      "Renamed while dismissed",
    );

    // restored from there, a parked one goes back on the list, pinned as waiting on its owner
    const parked = dismissed[0]!;
    await page.hover(`[data-session-id="${parked}"]`);
    await page.click(`[data-session-id="${parked}"] [data-testid="restore-session"]`);
    await page.waitForSelector(`[data-testid="session-list"] [data-session-id="${parked}"]`, {
      state: "detached",
    });
    await page.click('[data-testid="show-dismissed"]');
    await expect.poll(() => listed(page)).toEqual([parked, ...order]);
    expect(await page.$('.list-heading:has-text("Waiting on you")')).not.toBe(null);
    await page.close();
  }, 120_000);
});
