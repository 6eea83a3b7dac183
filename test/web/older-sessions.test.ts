import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, NETWORK_FAILURE, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { hostOrder, listedSessions, showOlder } from "./session-list-reads.js";

const SESSIONS = 120;
/** A bound on the pages a walk of the list reads: 120 sessions come in 3 pages of 50. */
const MAX_PAGES = 10;

const connection = (page: Page) => page.getAttribute('[data-testid="connection"]', "data-state");

describe.skipIf(!hasChromium)("browser console: more sessions than one page of the list", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("loads older pages on request until the oldest session, keeping rows that move or go while it pages", async () => {
    const { client } = fixture;
    const created: string[] = [];
    for (let i = 1; i <= SESSIONS; i++) {
      created.push((await client.call("session.create", { title: `Session ${i}` })).header.sessionId);
    }
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    await expect.poll(async () => (await listedSessions(page)).length).toBe(50);
    const first = await hostOrder(client);
    expect(await listedSessions(page)).toEqual(first.slice(0, 50));

    // a session of the second page, not loaded yet, gets a prompt: it comes to the top at once
    const risen = first[60]!;
    await client.prompt({ sessionId: risen, text: "moved up" });
    await expect.poll(async () => (await listedSessions(page))[0]).toBe(risen);

    await showOlder(page);
    // the keyboard goes on to the first row the page brought
    const firstOfPage = (await hostOrder(client))[51];
    await expect
      .poll(() => page.evaluate(() => document.activeElement?.getAttribute("data-session-id")))
      .toBe(firstOfPage);
    expect(await listedSessions(page)).toEqual((await hostOrder(client)).slice(0, 101));

    // while the third page is not loaded: a row of the second page and one of the third move to
    // the top, and one of the second is deleted
    const shown = await listedSessions(page);
    const fromSecond = shown[80]!;
    const deleted = shown[90]!;
    const fromThird = (await hostOrder(client))[110]!;
    await client.prompt({ sessionId: fromSecond, text: "moved up too" });
    await client.prompt({ sessionId: fromThird, text: "and this one" });
    await client.call("session.delete", { sessionId: deleted });
    await expect.poll(async () => (await listedSessions(page)).slice(0, 2)).toEqual([fromThird, fromSecond]);
    await expect.poll(async () => (await listedSessions(page)).includes(deleted)).toBe(false);

    for (let i = 0; i < MAX_PAGES && (await page.$('[data-testid="older-sessions"]')); i++)
      await showOlder(page);
    expect(await page.$('[data-testid="older-sessions"]')).toBe(null);
    const all = await listedSessions(page);
    expect(new Set(all).size).toBe(all.length);
    expect(all).toEqual(await hostOrder(client));
    expect(all).toHaveLength(SESSIONS - 1);

    // a reconnect reads the list again as far as it was paged: a session created while away
    // (its notification missed) is on top, and the older pages are still there
    browser.allowConsoleErrors(NETWORK_FAILURE);
    const { context } = browser.profile;
    try {
      await context.setOffline(true);
      await expect.poll(() => connection(page), { timeout: 15_000 }).not.toBe("open");
      created.push((await client.call("session.create", { title: "While away" })).header.sessionId);
    } finally {
      await context.setOffline(false);
    }
    await expect.poll(() => connection(page), { timeout: 20_000 }).toBe("open");
    await expect.poll(async () => (await listedSessions(page))[0]).toBe(created.at(-1));
    expect(await listedSessions(page)).toEqual(await hostOrder(client));
    expect(await page.$('[data-testid="older-sessions"]')).toBe(null);

    // the oldest session is reached and opens
    expect(all.at(-1)).toBe(created[0]);
    await page.click(`[data-testid="session-item"][data-session-id="${created[0]}"]`);
    await expect.poll(() => page.textContent('[data-testid="session-title"]')).toBe("Session 1");
    await page.close();
  }, 120_000);

  it("shows no button while every session fits on one page", async () => {
    for (let i = 1; i <= 5; i++) await fixture.client.create({ title: `Few ${i}` });
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    await expect.poll(async () => (await listedSessions(page)).length).toBeGreaterThan(0);
    // the first test left more than a page: this one deletes down to fewer
    const order = await hostOrder(fixture.client);
    for (const sessionId of order.slice(50)) await fixture.client.call("session.delete", { sessionId });
    await page.reload();
    await page.waitForSelector('[data-testid="connection"][data-state="open"]');
    await expect.poll(async () => (await listedSessions(page)).length).toBe(50);
    expect(await page.$('[data-testid="older-sessions"]')).toBe(null);
    await page.close();
  }, 60_000);
});
