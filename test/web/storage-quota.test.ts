import { describe, expect, it } from "vitest";
import { BOB_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog, turnEnds } from "./host-log.js";

describe.skipIf(!hasChromium)("browser console: a prompt the host refuses", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost({ principals: { maxStoredBytesPerPrincipal: 12_000 } });

  it("says why in the host's words and gives the text back to the composer", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, BOB_TOKEN);
    const sessionId = await newSession(page);
    const composer = '[data-testid="composer-input"]';
    // the message and the demo agent's echo: about 14 kB, past bob's 12,000 bytes
    await page.fill(composer, "x".repeat(7000));
    await page.press(composer, "Enter");
    await expect
      .poll(async () => turnEnds(await readLog(fixture.client, sessionId)), { timeout: 30_000 })
      .toBe(1);
    const head = (await readLog(fixture.client, sessionId)).length;

    await page.fill(composer, "one more question");
    await page.press(composer, "Enter");
    const toast = page.locator('[data-testid="toast"]');
    await toast.waitFor({ state: "visible" });
    expect(await toast.textContent()).toMatch(
      /^Send failed \(storage_quota_exceeded\): bob stores \d+ bytes .*delete or clear sessions/,
    );
    expect(await page.inputValue(composer)).toBe("one more question");
    expect(await readLog(fixture.client, sessionId)).toHaveLength(head);
  });
});
