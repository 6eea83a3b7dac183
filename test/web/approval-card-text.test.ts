import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";

describe.skipIf(!hasChromium)("browser console: the action an approval asks about", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("is shown whole in a phone-wide window: a long word wraps inside the card and its lines stay lines", async () => {
    const page = await browser.profile.newPage();
    await page.setViewportSize({ width: 360, height: 700 });
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    await page.click('[data-testid="toggle-sidebar"]');
    await page.click('[data-testid="new-session"]');
    await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).has("s"));
    const target = `deploy-${"x".repeat(120)}-end`;
    const composer = '[data-testid="composer-input"]';
    await page.fill(composer, `/approve ${target}\nthen drop the old tables`);
    await page.press(composer, "Enter");
    await page.waitForSelector('[data-testid="interaction-card"]');
    const shown = await page.$eval('[data-testid="interaction-card"] .card-body', (body) => {
      const card = body.closest(".card")!.getBoundingClientRect();
      const box = body.getBoundingClientRect();
      return {
        // the text as laid out: a line break the page collapses is not in it
        // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what is checked
        text: (body as HTMLElement).innerText,
        overflows: body.scrollWidth > body.clientWidth || box.right > card.right,
      };
    });
    expect(shown).toEqual({ text: `${target}\nthen drop the old tables`, overflows: false });
    await page.close();
  });
});
