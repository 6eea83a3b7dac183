import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";

const note = "Only the 50 newest are listed: search finds older ones by their messages";
/** The note's text as read, or null while the page shows none (read without waiting for one). */
const shownNote = (page: Page) =>
  page.evaluate(
    () =>
      document.querySelector('[data-testid="older-sessions"]')?.textContent?.replace(/\s+/g, " ").trim() ??
      null,
  );

describe.skipIf(!hasChromium)("browser console: more sessions than the list shows", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("says the list holds only the newest 50, and says nothing of the kind while all of them fit", async () => {
    for (let i = 1; i <= 50; i++) await fixture.client.create({ title: `Session ${i}` });
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    await expect.poll(() => page.locator('[data-testid="session-item"]').count()).toBe(50);
    expect(await shownNote(page)).toBe(null);

    await fixture.client.create({ title: "Session 51" });
    await page.reload();
    await page.waitForSelector('[data-testid="connection"][data-state="open"]');
    await expect.poll(() => page.textContent('[data-testid="session-item-title"]')).toBe("Session 51");
    expect(await page.locator('[data-testid="session-item"]').count()).toBe(50);
    await expect.poll(() => shownNote(page)).toBe(note);
    // a session created while the page is open pushes one more off the end: still said
    await fixture.client.create({ title: "Session 52" });
    await expect.poll(() => page.textContent('[data-testid="session-item-title"]')).toBe("Session 52");
    expect(await page.locator('[data-testid="session-item"]').count()).toBe(50);
    expect(await shownNote(page)).toBe(note);
    await page.close();
  });
});
