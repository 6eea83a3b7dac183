import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { hostOrder, listedSessions, showOlder, twoFrames } from "./session-list-reads.js";

/** More than one page of the Dismissed view (50), so its oldest sessions are on a page not loaded. */
const DISMISSED = 60;
/** The oldest dismissed sessions wait on an approval: parked, they would be pinned on the list. */
const PARKED = 3;
const LISTED = 5;

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
    await twoFrames(page);
    expect(await listedSessions(page)).toEqual(order);
    expect(await page.$('.list-heading:has-text("Waiting on you")')).toBe(null);

    // the Dismissed view pages to them, each once and in the host's order
    await page.click('[data-testid="show-dismissed"]');
    await expect.poll(() => listedSessions(page)).toEqual(dismissedOrder.slice(0, 50));
    await showOlder(page);
    await expect.poll(() => listedSessions(page)).toEqual(dismissedOrder);
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
    await expect.poll(() => listedSessions(page)).toEqual([parked, ...order]);
    expect(await page.$('.list-heading:has-text("Waiting on you")')).not.toBe(null);
    await page.close();
  }, 120_000);
});
