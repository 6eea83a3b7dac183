import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog, turnEnds } from "./host-log.js";

/** One turn of 12,000 deltas: longer than the ~11 pages of 1,000 events the console reads on open. */
const LONG_TURN = "/stream 12000 0";

/** The prompts whose bubbles are inside the transcript's view, top to bottom. */
const promptsInView = (page: Page) =>
  page.evaluate(() => {
    const view = document.querySelector('[data-testid="transcript"]')!.getBoundingClientRect();
    return [...document.querySelectorAll<HTMLElement>('[data-testid="user-message"]')]
      .filter((m) => {
        const box = m.getBoundingClientRect();
        return box.bottom > view.top && box.top < view.bottom;
      })
      .map((m) => m.querySelector(".bubble")?.textContent ?? "");
  });

describe.skipIf(!hasChromium)("browser console opening a session inside a very long last turn", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("says the turn's start is not loaded, and one press reads back to its prompt and shows it", async () => {
    const { client } = fixture;
    const { header } = await client.call("session.create", { title: "Long turn" });
    const sessionId = header.sessionId;
    await client.prompt({ sessionId, text: "a short first turn" });
    await client.prompt({ sessionId, text: LONG_TURN });
    await expect
      .poll(async () => turnEnds(await readLog(client, sessionId)), { timeout: 120_000, interval: 1000 })
      .toBe(2);

    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN, sessionId);
    await expect
      .poll(() => page.getAttribute('[data-testid="follow-state"]', "data-mode"), { timeout: 30_000 })
      .toBe("live");
    // opened at the tail, inside the long turn: its newest output is in view, its prompt is not held
    await page.waitForSelector('.bubble:has-text("chunk 12000")');
    expect(await page.$$eval('[data-testid="user-message"]', (els) => els.length)).toBe(0);
    // the top of the transcript says so, rather than reading as if the turn began there
    const line = '[data-testid="older-events"]';
    expect(await page.textContent(`${line} [data-testid="turn-start-missing"]`)).toContain("prompt");
    expect((await page.textContent(`${line} button`))?.trim()).toBe("Show the start of this turn");

    // pressed where it stands: a pointer click would scroll the transcript to its top first, which
    // reads the older pages by itself and takes the button away before the click lands
    await page.$eval(`${line} button`, (button) => (button as HTMLButtonElement).click());
    // every page back to the turn's start is read on that one press, and its prompt comes into view
    await expect.poll(() => promptsInView(page), { timeout: 30_000 }).toContain(LONG_TURN);
    expect(await page.$('[data-testid="turn-start-missing"]')).toBe(null);
    // the view left the tail for the prompt: the way back to the latest output is offered
    expect(await page.isVisible('[data-testid="jump-latest"]')).toBe(true);
    // the long turn reads whole from its start: its first chunk follows its prompt
    const firstChunks = await page.$$eval(".bubble", (els) =>
      els.some((e) => (e.textContent ?? "").trim().startsWith("chunk 1 chunk 2 ")),
    );
    expect(firstChunks).toBe(true);
    await page.close();
  }, 300_000);
});
