import { describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";

/**
 * The console's live state outlives a control stream that ended with an error: the host could not
 * read its baseline once (the database away for a moment), and the console, told so, opens the
 * stream again by itself instead of showing the agents as last known until a reload.
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
  it("shows a follow stream the host ended with an error as stopped, says why, and follows again", async () => {
    const { host, client } = consoleHost;
    await client.create({ sessionId: "stops" });
    const openRead = vi
      .spyOn(host.host, "openRead")
      .mockRejectedValueOnce(new SessionmuxError("persistence_failure", "the database is away"));
    try {
      const page = await browser.profile.newPage();
      await openConsole(page, host.url, ADMIN_TOKEN, "stops");
      const badge = '[data-testid="follow-state"]';
      await page.waitForSelector(`${badge}[data-mode="stopped"]`, { timeout: 10_000 });
      expect(await page.getAttribute(badge, "title")).toBe(
        "Stopped by the host (persistence_failure); retrying",
      );
      expect(await page.textContent(badge)).toBe("stopped");
      await page.waitForSelector(`${badge}[data-mode="live"]`, { timeout: 15_000 });
      expect(await page.getAttribute(badge, "title")).toBeNull();
      await page.close();
    } finally {
      openRead.mockRestore();
    }
  });
});
