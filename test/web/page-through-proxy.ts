import type { Page } from "playwright-core";
import { afterEach } from "vitest";
import type { TestHostFixture } from "../support/use-test-host.js";
import type { BrowserFixture } from "./browser.js";
import { type MuxProxy, type MuxProxyOptions, startMuxProxy } from "./mux-proxy.js";

/**
 * A page of the file's browser profile with a mux proxy of its own in front of the console host
 * (see `startMuxProxy`): the test opens the console on `proxy.url`. Both are closed after the
 * test whatever it did, the page first, before the file's check of what its pages reported.
 */
export function usePageThroughProxy(
  browser: BrowserFixture,
  consoleHost: TestHostFixture,
): { open(options?: MuxProxyOptions): Promise<{ page: Page; proxy: MuxProxy }> } {
  const opened: { page?: Page; proxy: MuxProxy }[] = [];
  afterEach(async () => {
    for (const { page, proxy } of opened.splice(0)) {
      await page?.close();
      await proxy.close();
    }
  });
  return {
    async open(options) {
      const entry: { page?: Page; proxy: MuxProxy } = {
        proxy: await startMuxProxy(consoleHost.host.url, options),
      };
      opened.push(entry);
      const page = await browser.profile.newPage();
      entry.page = page;
      return { page, proxy: entry.proxy };
    },
  };
}
