import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog } from "./host-log.js";
import { usePageThroughProxy } from "./page-through-proxy.js";

/** The console's call timeout (the SDK's default), which the page cannot be told to shorten. */
const CALL_TIMEOUT_MS = 30_000;

/**
 * A prompt whose frame reached the host but whose answer never came back (a path that went quiet
 * after the send) may have been taken: the console must not call it failed, and the text it
 * gives back to the composer must not run a second time when sent again.
 */
describe.skipIf(!hasChromium)("browser console: a call whose answer never came", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();
  const throughProxy = usePageThroughProxy(browser, consoleHost);

  it("says the prompt may have reached the host, and sending the text again does not repeat it", async () => {
    const { page, proxy } = await throughProxy.open();
    await openConsole(page, proxy.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    // the host's answers to calls wait at the proxy; the session's log still reaches the page
    proxy.hold((frame) => frame.type === "result");
    await sendPrompt(page, "/stream 2 1");
    await page.waitForSelector('[data-testid="user-message"]');
    const toast = page.locator('[data-testid="toast"]');
    await expect
      .poll(() => toast.textContent(), { timeout: CALL_TIMEOUT_MS + 15_000 })
      .toMatch(/^Send not confirmed \(timeout\): the host may have the prompt/);
    expect(await page.inputValue('[data-testid="composer-input"]')).toBe("/stream 2 1");

    // sent again: the host answers it from its record of the first
    proxy.release();
    proxy.hold((frame) => frame.type === "result");
    const held = proxy.held;
    await page.press('[data-testid="composer-input"]', "Enter");
    await expect.poll(() => proxy.held, { timeout: 10_000 }).toBe(held + 1);
    const prompts = (await readLog(consoleHost.client, sessionId)).filter((e) => e.type === "user/message");
    expect(prompts).toHaveLength(1);
    proxy.release();
    expect(await page.inputValue('[data-testid="composer-input"]')).toBe("");
  }, 90_000);

  it("says an answer whose reply never came may have been taken, not that it failed", async () => {
    const { page, proxy } = await throughProxy.open();
    await openConsole(page, proxy.url, ADMIN_TOKEN);
    await newSession(page);
    await sendPrompt(page, "/approve deploy");
    await page.waitForSelector('[data-testid="approve"]:not([disabled])');
    proxy.hold((frame) => frame.type === "result");
    await page.click('[data-testid="approve"]');
    // the host took it: the log says so, and the card shows it
    await page.waitForSelector('[data-testid="approve"]', { state: "detached", timeout: 10_000 });
    const toast = page.locator('[data-testid="toast"]');
    await expect
      .poll(() => toast.textContent(), { timeout: CALL_TIMEOUT_MS + 15_000 })
      .toMatch(/^Answer not confirmed \(timeout\): the host may have taken it/);
    proxy.release();
  }, 90_000);
});
