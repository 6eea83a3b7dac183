import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog } from "./host-log.js";

/**
 * The host refuses to clear a session while a turn of it is open (`session_busy`), waiting on a
 * person's answer included: the console's Clear must not be offered then, only to fail.
 */
describe.skipIf(!hasChromium)("console Clear while a turn is open", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();

  it("is not offered while the turn waits on an approval, says why, and clears once the turn ended", async () => {
    const { host, client } = consoleHost;
    const page = await browser.profile.newPage();
    await openConsole(page, host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await sendPrompt(page, "/approve deploy");
    await page.waitForSelector('[data-testid="interaction-card"] [data-testid="approve"]:not([disabled])');

    // what the host says to a clear now
    const refusal = await client.call("session.clear", { sessionId }).then(
      () => "cleared",
      (error: { code?: string }) => error.code,
    );
    expect(refusal).toBe("session_busy");
    const clear = page.locator('[data-testid="clear-session"]');
    await expect.poll(() => clear.isDisabled(), { timeout: 5_000 }).toBe(true);
    expect(await clear.getAttribute("title")).toMatch(/turn is running/);
    // the other actions stay offered: the host takes them while a turn runs
    for (const other of ["rename-session", "fork-session", "delete-session", "send"])
      expect(await page.locator(`[data-testid="${other}"]`).isDisabled()).toBe(false);

    await page.click('[data-testid="approve"]');
    await page.waitForSelector('[data-testid="assistant-message"]:not([data-streaming])');
    await expect.poll(() => clear.isDisabled(), { timeout: 10_000 }).toBe(false);
    expect(await clear.getAttribute("title")).toBeNull();
    const prompts = async () =>
      (await readLog(client, sessionId)).filter((e) => e.type === "user/message").length;
    expect(await prompts()).toBe(1);
    page.once("dialog", (dialog) => void dialog.accept());
    await clear.click();
    await expect.poll(prompts, { timeout: 10_000 }).toBe(0);
    await expect
      .poll(() => page.locator('[data-testid="user-message"]').count(), { timeout: 10_000 })
      .toBe(0);
    expect(await page.textContent('[data-testid="toast"]')).not.toMatch(/Clear failed/);
    await page.close();
  });
});
