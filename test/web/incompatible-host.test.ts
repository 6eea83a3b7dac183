import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { usePageThroughProxy } from "./page-through-proxy.js";

/**
 * A console whose host now greets it in protocol 2 (upgraded since the page loaded): the real
 * host serves the page and answers its socket, and a proxy between them changes only the version
 * its `hello` names. The console can do nothing with it but say so and ask for a reload.
 */
describe.skipIf(!hasChromium)("console of a host speaking another protocol version", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();
  const throughProxy = usePageThroughProxy(browser, consoleHost);

  it("shows the version in its indicator, asks for a reload, and never connects again", async () => {
    const { client } = consoleHost;
    const { header } = await client.call("session.create", {});
    const { page, proxy } = await throughProxy.open({
      rewriteHello: (hello) => ({ ...hello, protocol: 2 }),
    });
    // a shown session too: its transcript is read over the same connection
    const fragment = new URLSearchParams({ token: ADMIN_TOKEN, s: header.sessionId });
    await page.goto(`${proxy.url}/#${fragment.toString()}`);

    const indicator = page.locator('[data-testid="connection"]');
    await expect.poll(() => indicator.getAttribute("data-state"), { timeout: 10_000 }).toBe("incompatible");
    expect(await indicator.textContent()).toContain("Host speaks protocol 2");
    const toast = page.locator('[data-testid="toast"]');
    expect(await toast.isVisible()).toBe(true);
    expect(await toast.textContent()).toMatch(/protocol 2.*reload the page/);
    expect(proxy.upgrades).toBe(1);

    // What would make a waiting client try again now: the network back, the tab shown again.
    await page.evaluate(() => {
      dispatchEvent(new Event("online"));
      document.dispatchEvent(new Event("visibilitychange"));
    });
    // The console's streams are opened again after 2 s, then 4 s, when they fail: past both, and
    // past several of the client's backoff waits (250 ms doubling), it has tried all it would.
    await page.waitForTimeout(5_000);
    expect(proxy.upgrades).toBe(1);
    expect(await indicator.getAttribute("data-state")).toBe("incompatible");
    expect(await indicator.textContent()).toContain("Host speaks protocol 2");
    // the request to reload is still what the page says
    expect(await toast.textContent()).toMatch(/protocol 2.*reload the page/);
  });
});
