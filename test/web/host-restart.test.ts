import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { hasChromium, NETWORK_FAILURE, newSession, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { assistantText, readLog, turnEnds } from "./host-log.js";
import { killHost as kill, useSpawnedHosts } from "./spawned-host.js";

const TOKEN = "restart-test-token";

const transcriptText = (page: Page) =>
  page.$$eval('[data-testid="assistant-text"]', (els) => els.map((e) => e.textContent ?? "").join(""));

describe.skipIf(!hasChromium)("browser console across a host crash", () => {
  const browser = useBrowser();
  const hosts = useSpawnedHosts(TOKEN);

  it("reconnects by itself after SIGKILL and a restart on the same port, shows the job the crash interrupted, then keeps working", async () => {
    const first = await hosts.start(0);
    const url = `http://127.0.0.1:${first.port}`;
    const page = await browser.profile.newPage();
    await openConsole(page, url, TOKEN);
    const sessionId = await newSession(page);
    await sendPrompt(page, "/stream 5 10");
    await page.waitForSelector('[data-testid="assistant-message"]:not([data-streaming])');
    // a job that outlives its turn, running when the host dies
    await sendPrompt(page, "/job 120");
    await page.waitForSelector('[data-testid="job"][data-state="running"]');

    // Chromium logs each refused reconnect attempt while the host is down.
    browser.allowConsoleErrors(NETWORK_FAILURE);
    await kill(first.child);
    // The indicator counts down to the next attempt while the host is gone. State and text are
    // read together: a short jittered backoff may end between two separate reads.
    await page.waitForFunction(() => {
      const indicator = document.querySelector('[data-testid="connection"]');
      return (
        indicator?.getAttribute("data-state") === "backoff" &&
        // the network is up: the host, not the browser, is what cannot be reached
        /Offline · retrying in \d+s/.test(indicator.textContent ?? "")
      );
    });

    const second = await hosts.start(first.port);
    await page.waitForSelector('[data-testid="connection"][data-state="open"]', { timeout: 20_000 });
    await page.waitForSelector('[data-testid="restart-notice"]:not([hidden])', { timeout: 20_000 });
    // the live panel drops the job with the old host's state; the transcript keeps how it ended
    const job = page.locator('[data-testid="job"]');
    await expect.poll(() => job.getAttribute("data-state"), { timeout: 20_000 }).toBe("interrupted");
    expect(await job.textContent()).toContain("interrupted");

    await sendPrompt(page, "/stream 8 10");
    const client = createNodeClient({ url: `ws://127.0.0.1:${second.port}/api/remote.mux`, token: TOKEN });
    try {
      await expect.poll(async () => turnEnds(await readLog(client, sessionId)), { timeout: 20_000 }).toBe(3);
      const expected = assistantText(await readLog(client, sessionId));
      await expect.poll(() => transcriptText(page), { timeout: 15_000 }).toBe(expected);
      expect(await page.locator('[data-testid="user-message"]').count()).toBe(3);
    } finally {
      await client.close();
    }
  });
});
