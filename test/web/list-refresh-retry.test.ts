import { describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, NETWORK_FAILURE, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { usePageThroughProxy } from "./page-through-proxy.js";

/**
 * Notifications carry no sequence: what a tab missed while its socket was down is recovered by the
 * list it reads on reconnect. A read the host failed (its database away a moment) must be made
 * again, or the list keeps what the tab last knew for as long as the socket stays up.
 */
describe.skipIf(!hasChromium)("browser console: the list read after a reconnect failed", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();
  const throughProxy = usePageThroughProxy(browser, consoleHost);

  it("reads it again, and a session deleted while the tab was away leaves the list", async () => {
    browser.allowConsoleErrors(NETWORK_FAILURE);
    const { host, client } = consoleHost;
    const kept = (await client.create({ title: "Medlar kept" })).header.sessionId;
    const gone = (await client.create({ title: "Medlar gone" })).header.sessionId;
    const { page, proxy } = await throughProxy.open();
    const rowIds = () =>
      page.$$eval('[data-testid="session-item"]', (els) => els.map((el) => el.dataset.sessionId).sort());
    const original = host.host.call.bind(host.host);
    const calls = vi.spyOn(host.host, "call");
    try {
      await openConsole(page, proxy.url, ADMIN_TOKEN);
      await expect.poll(rowIds, { timeout: 10_000 }).toEqual([kept, gone].sort());

      // the tab misses the delete's notification, then its socket goes
      proxy.hold((frame) => frame.type === "event");
      await client.call("session.delete", { sessionId: gone });
      const reads = calls.mock.calls.filter(([, method]) => method === "session.list").length;
      // the first list read after the reconnect fails, as with the database away a moment
      let failed = false;
      calls.mockImplementation((principal, method, params) => {
        if (method !== "session.list" || failed) return original(principal, method, params);
        failed = true;
        return Promise.reject(new SessionmuxError("persistence_failure", "the database is away"));
      });
      proxy.cut();
      proxy.release();
      await expect
        .poll(() => page.textContent('[data-testid="toast"]'), { timeout: 15_000 })
        .toMatch(/^Could not load sessions/);
      await expect.poll(rowIds, { timeout: 15_000 }).toEqual([kept]);
      expect(calls.mock.calls.filter(([, method]) => method === "session.list").length).toBeGreaterThan(
        reads + 3,
      );
    } finally {
      calls.mockRestore();
    }
  });
});
