import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";

/** The pairs of a header badge and an action button whose boxes overlap, by their test ids. */
const overlaps = (page: Page) =>
  page.evaluate(() => {
    const box = (id: string) => document.querySelector(`[data-testid="${id}"]`)!.getBoundingClientRect();
    const badges = ["follow-state", "agent-status"];
    const buttons = ["rename-session", "fork-session", "clear-session", "delete-session"];
    const header = document.querySelector(".session-header")!.getBoundingClientRect();
    const found: string[] = [];
    for (const badge of badges) {
      const a = box(badge);
      if (a.left < header.left || a.right > header.right) found.push(`${badge} outside the header`);
      for (const button of buttons) {
        const b = box(button);
        if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)
          found.push(`${badge} under ${button}`);
      }
    }
    return found;
  });

describe.skipIf(!hasChromium)(
  "browser console: the session header at the widths above the narrow layout",
  () => {
    const browser = useBrowser();
    const fixture = useConsoleHost();

    it("never draws the state badges under the action buttons, whatever the width", async () => {
      const page = await browser.profile.newPage();
      await openConsole(page, fixture.host.url, ADMIN_TOKEN);
      await page.click('[data-testid="new-session"]');
      await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).has("s"));
      await sendPrompt(page, "/approve deploy");
      // the longest badge the header shows
      await expect
        .poll(() => page.textContent('[data-testid="agent-status"]'))
        .toBe("waiting for your answer");
      // 761 px is the narrowest window with the sidebar beside the session
      for (const width of [1280, 1024, 900, 800, 761]) {
        await page.setViewportSize({ width, height: 700 });
        expect({ width, overlaps: await overlaps(page) }).toEqual({ width, overlaps: [] });
      }
      await page.close();
    });
  },
);
