import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { usePageThroughProxy } from "./page-through-proxy.js";

const staleMark = (page: Page, testId: string) =>
  page.getAttribute(`[data-testid="${testId}"]`, "data-stale");

/**
 * A token given to a running console (a printed URL opened again in the same tab) replaces its
 * client: the live state the old one mirrored is no longer kept current by anything, so until the
 * new client's control stream brings its baseline it is only last known.
 */
describe.skipIf(!hasChromium)("browser console: live state across a new token", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();
  const throughProxy = usePageThroughProxy(browser, consoleHost);

  it("marks the agent's state last known until the new connection's live state arrives", async () => {
    const { page, proxy } = await throughProxy.open();
    await openConsole(page, proxy.url, ADMIN_TOKEN);
    await newSession(page);
    await sendPrompt(page, "/approve deploy");
    await page.waitForSelector('[data-testid="interaction-card"]');
    const status = page.locator('[data-testid="agent-status"]');
    await expect.poll(() => status.textContent(), { timeout: 10_000 }).toBe("waiting for your answer");
    expect(await staleMark(page, "agent-status")).toBeNull();

    // from here no stream item reaches the page: the new client's control baseline is held
    proxy.hold((frame) => frame.type === "item");
    const upgrades = proxy.upgrades;
    await page.evaluate((token) => {
      location.hash = `token=${encodeURIComponent(token)}&${location.hash.slice(1)}`;
    }, ADMIN_TOKEN);
    await expect.poll(() => proxy.upgrades, { timeout: 10_000 }).toBe(upgrades + 1);
    await page.waitForSelector('[data-testid="connection"][data-state="open"]');
    await page.waitForSelector('[data-testid="send"]:not([disabled])');
    // drawn in the frame that enabled Send: nothing keeps the old client's state current
    expect(await staleMark(page, "agent-status")).toBe("true");

    proxy.release();
    await expect.poll(() => staleMark(page, "agent-status"), { timeout: 10_000 }).toBeNull();
    expect(await status.textContent()).toBe("waiting for your answer");
  });
});
