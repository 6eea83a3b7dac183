import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog, turnEnds } from "./host-log.js";

describe.skipIf(!hasChromium)("browser console: editing a queued prompt that starts meanwhile", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("closes the edit dialog once the prompt leaves the queue, says so, and puts the edited text in the composer", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    const composer = '[data-testid="composer-input"]';
    // a turn that waits on an approval holds the next prompt in the queue until it is answered
    await page.fill(composer, "/approve deploy");
    await page.press(composer, "Enter");
    await page.waitForSelector('[data-testid="interaction-card"]');
    await page.fill(composer, "queued as written");
    await page.press(composer, "Enter");
    await page.waitForSelector('[data-testid="queue-item"]');

    await page.click('[data-action="queue-edit"]');
    const dialog = page.locator('[data-testid="text-dialog"]');
    await dialog.waitFor({ state: "visible" });
    await page.fill('[data-testid="text-dialog-input"]', "queued as edited");
    // another client answers: the turn ends and the queued prompt starts as written
    const requested = (await readLog(fixture.client, sessionId)).find(
      (e) => e.type === "interaction/requested",
    );
    if (requested?.type !== "interaction/requested") throw new Error("no approval was asked");
    await fixture.client.call("session.respond", {
      interactionId: requested.data.interactionId,
      response: { outcome: "approve" },
    });
    await expect
      .poll(async () => turnEnds(await readLog(fixture.client, sessionId)), { timeout: 30_000 })
      .toBe(2);

    await dialog.waitFor({ state: "hidden" });
    const toast = page.locator('[data-testid="toast"]');
    await toast.waitFor({ state: "visible" });
    expect(await toast.textContent()).toBe(
      "The queued prompt left the queue (it started, or another tab sent or removed it) before the edit was saved; your edited text is in the composer.",
    );
    expect(await page.inputValue(composer)).toBe("queued as edited");
    await expect
      .poll(() => page.evaluate(() => document.activeElement?.getAttribute("data-testid")))
      .toBe("composer-input");
    const texts = (await readLog(fixture.client, sessionId)).flatMap((e) =>
      e.type === "user/message" ? [e.data.text] : [],
    );
    expect(texts).toEqual(["/approve deploy", "queued as written"]);
    await page.close();
  });
});
