import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog } from "./host-log.js";

/** The test id of the element that has the keyboard, or its tag when it has none. */
const focused = (page: Page) =>
  page.evaluate(() => {
    const el = document.activeElement as HTMLElement | null;
    return el?.dataset.testid ?? el?.tagName.toLowerCase() ?? "none";
  });

describe.skipIf(!hasChromium)("browser console: the keyboard alone", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("types into a new session at once, and after a delete goes on from New session rather than from nowhere", async () => {
    const page = await browser.profile.newPage();
    page.on("dialog", (dialog) => void dialog.accept());
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    await page.focus('[data-testid="new-session"]');
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).has("s"));
    const sessionId = await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get("s")!);
    await expect.poll(() => focused(page)).toBe("composer-input");
    await page.keyboard.type("typed without a click");
    await page.keyboard.press("Enter");
    await page.waitForSelector('[data-testid="user-message"]');
    const texts = (await readLog(fixture.client, sessionId)).flatMap((e) =>
      e.type === "user/message" ? [e.data.text] : [],
    );
    expect(texts).toEqual(["typed without a click"]);

    await page.focus('[data-testid="delete-session"]');
    await page.keyboard.press("Enter");
    await page.waitForSelector('[data-testid="empty-state"]:not([hidden])');
    await expect.poll(() => focused(page)).toBe("new-session");
    await page.close();
  });
});
