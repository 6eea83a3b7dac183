import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog, turnEnds } from "./host-log.js";

describe.skipIf(!hasChromium)("browser console: a session deleted by another tab or client", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("is said to be deleted where it was open, and leaves no search hit behind; a delete made here says nothing of the kind", async () => {
    const client = fixture.client;
    const gone = (await client.create({ title: "Kumquat notes" })).header.sessionId;
    const kept = (await client.create({ title: "Kumquat plans" })).header.sessionId;
    for (const sessionId of [gone, kept]) {
      await client.prompt({ sessionId, text: "kumquat harvest" });
      await expect.poll(async () => turnEnds(await readLog(client, sessionId)), { timeout: 30_000 }).toBe(1);
    }
    const page = await browser.profile.newPage();
    page.on("dialog", (dialog) => void dialog.accept());
    await openConsole(page, fixture.host.url, ADMIN_TOKEN, gone);
    await page.waitForSelector('[data-testid="user-message"]');
    await page.fill('[data-testid="search"]', "kumquat");
    const hitSessions = () =>
      page.$$eval('[data-testid="search-hit"]', (els) =>
        [...new Set(els.map((e) => e.dataset.sessionId))].sort(),
      );
    await expect.poll(hitSessions).toEqual([gone, kept].sort());

    await client.call("session.delete", { sessionId: gone });
    await page.waitForSelector('[data-testid="empty-state"]:not([hidden])');
    const toast = page.locator('[data-testid="toast"]');
    await toast.waitFor({ state: "visible" });
    expect(await toast.textContent()).toBe("“Kumquat notes” was deleted by another tab or client.");
    await expect.poll(hitSessions).toEqual([kept]);

    // deleted from this page: no word of another tab
    await page.evaluate(() => {
      const t = document.querySelector<HTMLElement>('[data-testid="toast"]')!;
      t.hidden = true;
    });
    await page.click('[data-testid="search-hit"]');
    await expect.poll(() => page.textContent('[data-testid="session-title"]')).toBe("Kumquat plans");
    await page.click('[data-testid="delete-session"]');
    await page.waitForSelector('[data-testid="empty-state"]:not([hidden])');
    await expect.poll(hitSessions).toEqual([]);
    await expect.poll(() => page.$$eval('[data-testid="session-item"]', (els) => els.length)).toBe(0);
    expect(await toast.isHidden()).toBe(true);
    await page.close();
  });
});
