import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog } from "./host-log.js";

describe.skipIf(!hasChromium)("browser console: the composer's drafts", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("keeps what was typed with the session it was typed for: another session opens with its own draft, and Enter there sends nothing of the first", async () => {
    const x = (await fixture.client.create({ title: "Draft X" })).header.sessionId;
    const y = (await fixture.client.create({ title: "Draft Y" })).header.sessionId;
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN, x);
    const composer = '[data-testid="composer-input"]';
    const open = async (title: string) => {
      await page.click(`[data-testid="session-item"]:has-text("${title}")`);
      await expect.poll(() => page.textContent('[data-testid="session-title"]')).toBe(title);
    };

    await page.fill(composer, "meant for X only");
    await open("Draft Y");
    expect(await page.inputValue(composer)).toBe("");
    // Enter on an empty composer sends nothing
    await page.press(composer, "Enter");
    await page.fill(composer, "meant for Y");
    await open("Draft X");
    expect(await page.inputValue(composer)).toBe("meant for X only");
    await page.press(composer, "Enter");
    await page.waitForSelector('[data-testid="user-message"]');
    await open("Draft Y");
    expect(await page.inputValue(composer)).toBe("meant for Y");

    const texts = async (sessionId: string) =>
      (await readLog(fixture.client, sessionId)).flatMap((e) =>
        e.type === "user/message" ? [e.data.text] : [],
      );
    expect(await texts(x)).toEqual(["meant for X only"]);
    expect(await texts(y)).toEqual([]);
    await page.close();
  });
});
