import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, NETWORK_FAILURE, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { usePageThroughProxy } from "./page-through-proxy.js";

/**
 * A delete is shown at once: the session leaves the list as the button is pressed. One that never
 * took effect (its socket died on the way, so the host never saw it) must not leave the list
 * short of a session the host still has.
 */
describe.skipIf(!hasChromium)("browser console: a delete that failed", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();
  const throughProxy = usePageThroughProxy(browser, consoleHost);

  it("puts the session back on the list once the host says it still has it", async () => {
    browser.allowConsoleErrors(NETWORK_FAILURE);
    const { sessionId } = (await consoleHost.client.create({ title: "Quince ledger" })).header;
    const { page, proxy } = await throughProxy.open();
    page.on("dialog", (dialog) => void dialog.accept());
    await openConsole(page, proxy.url, ADMIN_TOKEN, sessionId);
    const row = page.locator(`[data-testid="session-item"][data-session-id="${sessionId}"]`);
    await row.waitFor();
    await page.waitForSelector('[data-testid="delete-session"]:not([disabled])');

    // the delete is lost with its socket: the host never hears of it
    proxy.cutOn((frame) => frame.type === "call" && frame.method === "session.delete");
    await page.click('[data-testid="delete-session"]');
    const toast = page.locator('[data-testid="toast"]');
    await expect.poll(() => toast.textContent(), { timeout: 10_000 }).toMatch(/^Delete failed/);
    await page.waitForSelector('[data-testid="connection"][data-state="open"]', { timeout: 10_000 });

    const header = await consoleHost.client.call("session.page", { sessionId, limit: 1 });
    expect(header.header.title).toBe("Quince ledger");
    await row.waitFor({ timeout: 10_000 });
  });
});
