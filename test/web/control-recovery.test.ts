import type { Page } from "playwright-core";
import { describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";

/**
 * The console's live state outlives a control stream that ended with an error: the host could not
 * read its baseline once (the database away for a moment), and the console, told so, opens the
 * stream again by itself instead of showing the agents as last known until a reload. A follow
 * stream whose open the database failed is retried by the host, and the console shows it waiting,
 * not stopped; one the host ended with an error it does not retry is shown stopped, and followed
 * again.
 */
describe.skipIf(!hasChromium)("console live state after a failed control stream", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();

  it("says the live state is unavailable, opens the control stream again, and shows it live", async () => {
    const { host, client } = consoleHost;
    await client.create({ sessionId: "recovers" });
    const baseline = vi
      .spyOn(host.host, "controlBaseline")
      .mockRejectedValueOnce(new SessionmuxError("persistence_failure", "the database is away"));
    try {
      const page = await browser.profile.newPage();
      await openConsole(page, host.url, ADMIN_TOKEN, "recovers");
      await expect
        .poll(() => page.textContent('[data-testid="toast"]'), { timeout: 10_000 })
        .toMatch(/Live state unavailable.*the database is away/);
      // stale while there is no mirror, live once the stream opened again has its baseline
      await expect
        .poll(() => page.getAttribute('[data-testid="agent-status"]', "data-stale"), { timeout: 15_000 })
        .toBeNull();
      expect(baseline).toHaveBeenCalledTimes(2);
      await page.close();
    } finally {
      baseline.mockRestore();
    }
  });
  it("never shows stopped for a follow stream whose open the host retries (the database away a moment): replaying, then live", async () => {
    const { host, client } = consoleHost;
    await client.create({ sessionId: "waits" });
    const away = () => new SessionmuxError("persistence_failure", "the database is away");
    const openRead = vi
      .spyOn(host.host, "openRead")
      .mockRejectedValueOnce(away())
      .mockRejectedValueOnce(away());
    try {
      const page = await browser.profile.newPage();
      await recordFollowModes(page);
      await openConsole(page, host.url, ADMIN_TOKEN, "waits");
      const badge = '[data-testid="follow-state"]';
      await page.waitForSelector(`${badge}[data-mode="live"]`, { timeout: 15_000 });
      // the host's third try opened it: the console opened one stream and saw it wait
      expect(openRead).toHaveBeenCalledTimes(3);
      const modes = await page.evaluate(() => (window as unknown as { followModes: string[] }).followModes);
      expect(modes).toContain("replaying");
      expect(modes).not.toContain("stopped");
      expect(await page.getAttribute(badge, "title")).toBeNull();
      await page.close();
    } finally {
      openRead.mockRestore();
    }
  });
  it("shows a follow stream the host ended with an error as stopped, says why, and follows again", async () => {
    const { host, client } = consoleHost;
    await client.create({ sessionId: "stops" });
    // a fault the host does not retry: the stream ends with internal_error
    const openRead = vi.spyOn(host.host, "openRead").mockRejectedValueOnce(new Error("a fault of the host"));
    try {
      const page = await browser.profile.newPage();
      await openConsole(page, host.url, ADMIN_TOKEN, "stops");
      const badge = '[data-testid="follow-state"]';
      await page.waitForSelector(`${badge}[data-mode="stopped"]`, { timeout: 10_000 });
      expect(await page.getAttribute(badge, "title")).toBe("Stopped by the host (internal_error); retrying");
      expect(await page.textContent(badge)).toBe("stopped");
      await page.waitForSelector(`${badge}[data-mode="live"]`, { timeout: 15_000 });
      expect(await page.getAttribute(badge, "title")).toBeNull();
      await page.close();
    } finally {
      openRead.mockRestore();
    }
  });
});

/** Records, in `window.followModes`, every mode the follow-state badge shows from the page's start. */
async function recordFollowModes(page: Page): Promise<void> {
  await page.addInitScript(() => {
    const modes: string[] = [];
    (window as unknown as { followModes: string[] }).followModes = modes;
    new MutationObserver((records) => {
      for (const record of records) {
        const mode = (record.target as Element).getAttribute("data-mode");
        if (mode && (record.target as Element).getAttribute("data-testid") === "follow-state")
          modes.push(mode);
      }
    }).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-mode"] });
  });
}
