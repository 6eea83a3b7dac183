import { describe, expect, it } from "vitest";
import type { SessionmuxClient } from "../../src/client/node.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { listedSessions } from "./session-list-reads.js";

const SESSIONS = 70;
/** A bound on the pages a walk reads: 70 sessions come in 2 pages of 50. */
const MAX_PAGES = 10;

/** The host's dismissed sessions, newest first, read page by page with its cursor. */
async function dismissedOrder(client: SessionmuxClient): Promise<string[]> {
  const ids: string[] = [];
  let before: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const answer = await client.call("session.list", {
      limit: 50,
      dismissed: true,
      ...(before ? { before } : {}),
    });
    ids.push(...answer.sessions.map((row) => row.sessionId));
    before = answer.next;
    if (before === undefined) return ids;
  }
  throw new Error(`the dismissed list did not end within ${MAX_PAGES} pages`);
}

const row = (sessionId: string) => `[data-testid="session-list"] [data-session-id="${sessionId}"]`;

describe.skipIf(!hasChromium)("browser console: more dismissed sessions than one page", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("pages the dismissed view to its oldest session, which restores onto the list", async () => {
    const { client } = fixture;
    const created: string[] = [];
    for (let i = 1; i <= SESSIONS; i++) {
      const { sessionId } = (await client.call("session.create", { title: `Dismissed ${i}` })).header;
      await client.call("session.dismiss", { sessionId });
      created.push(sessionId);
    }
    const order = await dismissedOrder(client);
    expect(order).toHaveLength(SESSIONS);

    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    await page.click('[data-testid="show-dismissed"]');
    await expect.poll(async () => (await listedSessions(page)).length).toBe(50);
    expect(await listedSessions(page)).toEqual(order.slice(0, 50));

    // the same button as the list's, reached with the keyboard
    await page.focus('[data-testid="older-sessions"]');
    await page.keyboard.press("Enter");
    await expect.poll(async () => (await listedSessions(page)).length).toBe(SESSIONS);
    expect(await listedSessions(page)).toEqual(order);
    expect(await page.$('[data-testid="older-sessions"]')).toBe(null);
    await expect
      .poll(() => page.evaluate(() => document.activeElement?.getAttribute("data-session-id")))
      .toBe(order[50]);

    const oldest = created[0]!;
    expect(order.at(-1)).toBe(oldest);
    await page.hover(row(oldest));
    await page.click(`${row(oldest)} [data-testid="restore-session"]`);
    await page.waitForSelector(row(oldest), { state: "detached" });
    await expect.poll(async () => (await dismissedOrder(client)).includes(oldest)).toBe(false);
    expect(await listedSessions(page)).toEqual(order.slice(0, -1));

    await page.click('[data-testid="show-dismissed"]');
    await expect.poll(() => listedSessions(page)).toEqual([oldest]);
    await page.close();
  }, 120_000);

  it("loads the next page of dismissed sessions when the view is scrolled to its end", async () => {
    const order = await dismissedOrder(fixture.client);
    // the first test left more than a page dismissed
    expect(order.length).toBeGreaterThan(50);
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    await page.click('[data-testid="show-dismissed"]');
    await expect.poll(async () => (await listedSessions(page)).length).toBe(50);
    await page.hover('[data-testid="session-list"]');
    for (let i = 0; i < MAX_PAGES && (await listedSessions(page)).length < order.length; i++) {
      await page.mouse.wheel(0, 4000);
      await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(resolve)));
    }
    await expect.poll(() => listedSessions(page)).toEqual(order);
    expect(await page.$('[data-testid="older-sessions"]')).toBe(null);
    await page.close();
  }, 60_000);
});
