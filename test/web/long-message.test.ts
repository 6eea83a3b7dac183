import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog, turnEnds } from "./host-log.js";

describe.skipIf(!hasChromium)("browser console: a message longer than the host stores", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("says under it that the host keeps only its first 16,000 characters; a short one says nothing", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    const composer = '[data-testid="composer-input"]';
    await page.fill(composer, "a short one");
    await page.press(composer, "Enter");
    await expect
      .poll(async () => turnEnds(await readLog(fixture.client, sessionId)), { timeout: 30_000 })
      .toBe(1);
    // 20,000 characters, 20,000 bytes: within what a frame carries, past what the host stores
    await page.fill(composer, `${"a".repeat(19_993)}THE END`);
    await page.press(composer, "Enter");
    await expect
      .poll(async () => turnEnds(await readLog(fixture.client, sessionId)), { timeout: 30_000 })
      .toBe(2);

    const stored = (await readLog(fixture.client, sessionId)).flatMap((e) =>
      e.type === "user/message" ? [e.data.text.length] : [],
    );
    expect(stored).toEqual([11, 16_000]);
    await expect.poll(() => page.locator('[data-testid="user-message"]').count()).toBe(2);
    const notes = await page.$$eval('[data-testid="user-message"]', (messages) =>
      messages.map(
        (m) => m.querySelector('[data-testid="message-cut"]')?.textContent?.replace(/\s+/g, " ") ?? null,
      ),
    );
    expect(notes).toEqual([
      null,
      "The host keeps the first 16,000 characters of a message: anything past them is not shown.",
    ]);
    await page.close();
  });
});
