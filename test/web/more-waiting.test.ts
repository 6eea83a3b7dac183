import { describe, expect, it } from "vitest";
import { MAX_PINNED } from "../../web/src/session-list-order.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { until } from "../support/until.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { hostOrder, listedSessions } from "./session-list-reads.js";

/** Sessions waiting on you: more than the list pins at first. */
const WAITING = MAX_PINNED + 3;

describe.skipIf(!hasChromium)("browser console: more sessions waiting on you than are pinned", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("says so under the pins, and its button pins the rest, taking the keyboard to the first of them", async () => {
    const { client } = fixture;
    const parked = async () =>
      (await client.call("session.list", { limit: 200, parked: true })).sessions.map((r) => r.sessionId);
    for (let i = 1; i <= WAITING; i++) {
      const { sessionId } = (await client.call("session.create", { title: `Waiting ${i}` })).header;
      await client.prompt({ sessionId, text: "/approve deploy" });
      await until(async () => (await parked()).includes(sessionId), 10_000, "the session waits on you");
    }
    // newer sessions fill the first page: the oldest waiting ones stand past it
    for (let i = 1; i <= 55; i++) await client.call("session.create", { title: `Session ${i}` });
    const waiting = await parked();
    const order = await hostOrder(client);

    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const recent = order.filter((id) => !waiting.slice(0, MAX_PINNED).includes(id)).slice(0, 50);
    await expect.poll(() => listedSessions(page)).toEqual([...waiting.slice(0, MAX_PINNED), ...recent]);
    const more = page.locator('[data-testid="more-waiting"]');
    expect(await more.textContent()).toBe("Show more sessions waiting on you");

    await more.focus();
    await page.keyboard.press("Enter");
    // the three stood past the page loaded: pinned now, the rows below are the same
    await expect.poll(() => listedSessions(page)).toEqual([...waiting, ...recent]);
    expect(await more.count()).toBe(0);
    await expect
      .poll(() => page.evaluate(() => document.activeElement?.getAttribute("data-session-id")))
      .toBe(waiting[MAX_PINNED]);
    await page.close();
  }, 120_000);
});
