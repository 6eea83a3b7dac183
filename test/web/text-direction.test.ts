import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";

/**
 * Whether the first character of the element's text lies inside the element's box: a title cut
 * with an ellipsis must show its beginning, whichever way its script runs.
 */
const firstCharacterShown = (page: Page, selector: string) =>
  page.$eval(selector, (el) => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT, (node) =>
      node.textContent?.trim() ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_SKIP,
    );
    const node = walker.nextNode()!;
    const offset = node.textContent!.search(/\S/);
    const range = document.createRange();
    range.setStart(node, offset);
    range.setEnd(node, offset + 1);
    const glyph = range.getBoundingClientRect();
    const box = el.getBoundingClientRect();
    return glyph.width > 0 && glyph.left >= box.left - 1 && glyph.right <= box.right + 1;
  });

const direction = (page: Page, selector: string) =>
  page.$eval(selector, (el) => getComputedStyle(el).direction);

describe.skipIf(!hasChromium)("browser console: text written right to left", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("shows a long Hebrew title from its first word in the header and the list, and lays out Hebrew messages right to left", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    await page.click('[data-testid="new-session"]');
    await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).has("s"));
    await sendPrompt(page, "שלום, מה שלומך? 42");
    await page.waitForSelector('[data-testid="assistant-text"]');

    const title = `שלום עולם ${"כותרת ארוכה מאוד ".repeat(8)}סוף`;
    await page.click('[data-testid="rename-session"]');
    await page.fill('[data-testid="text-dialog-input"]', title);
    await page.press('[data-testid="text-dialog-input"]', "Enter");
    await expect.poll(() => page.textContent('[data-testid="session-title"]')).toBe(title);
    await expect.poll(() => page.textContent('[data-testid="session-item-title"]')).toBe(title);
    // longer than either box: both end in an ellipsis, which must cut the title's end, not its start
    expect(await firstCharacterShown(page, '[data-testid="session-title"]')).toBe(true);
    expect(await firstCharacterShown(page, '[data-testid="session-item-title"]')).toBe(true);

    expect(await direction(page, '[data-testid="user-message"] .bubble')).toBe("rtl");
    await page.fill('[data-testid="composer-input"]', "מה נשמע");
    expect(await direction(page, '[data-testid="composer-input"]')).toBe("rtl");
    await page.close();
  });
});
