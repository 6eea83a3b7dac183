import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog, turnEnds } from "./host-log.js";
import { startMuxProxy } from "./mux-proxy.js";

/**
 * A delete whose answer never came (the call timed out after it went out) puts the session back
 * until a fresh list says whether the host still has it. The host did delete it, and said so
 * (`session.removed`): nothing may bring the row back after that, the live state's last row of
 * the session included.
 */
describe.skipIf(!hasChromium)("browser console: a delete the host took but never confirmed", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();

  it("keeps the session off the list once the host said it was deleted, whatever changes after", async () => {
    const client = consoleHost.client;
    const gone = (await client.create({ title: "Medlar accounts" })).header.sessionId;
    const other = (await client.create({ title: "Sorb orchard" })).header.sessionId;
    const proxy = await startMuxProxy(consoleHost.host.url);
    const page = await browser.profile.newPage();
    page.on("dialog", (dialog) => void dialog.accept());
    const row = (sessionId: string) =>
      page.locator(`[data-testid="session-item"][data-session-id="${sessionId}"]`);
    try {
      await openConsole(page, proxy.url, ADMIN_TOKEN, gone);
      // a turn while the page watches: the live state holds the session's row
      await client.prompt({ sessionId: gone, text: "count the medlars" });
      await expect.poll(async () => turnEnds(await readLog(client, gone)), { timeout: 30_000 }).toBe(1);
      await expect.poll(() => row(gone).textContent()).toMatch(/1 turn/);
      await page.waitForSelector('[data-testid="delete-session"]:not([disabled])');

      // the host deletes it and says so; its answer to the call never reaches the page
      proxy.hold(
        (frame) => frame.type === "result" && (frame.value as { deleted?: unknown })?.deleted === true,
      );
      await page.click('[data-testid="delete-session"]');
      await expect.poll(() => proxy.held).toBe(1);
      const toast = page.locator('[data-testid="toast"]');
      // the call's timeout (30 s): not confirmed, not failed
      await expect
        .poll(() => toast.textContent(), { timeout: 40_000 })
        .toMatch(/^Delete not confirmed \(timeout\)/);
      expect((await client.list({})).sessions.map((s) => s.sessionId)).toEqual([other]);

      // the live state changes after: another session renamed
      await client.call("session.rename", { sessionId: other, title: "Sorb orchard, renamed" });
      await expect.poll(() => row(other).textContent()).toMatch(/Sorb orchard, renamed/);
      expect(await row(gone).count()).toBe(0);
      // and once more, with a new turn of the other session
      await client.prompt({ sessionId: other, text: "prune" });
      await expect.poll(() => row(other).textContent(), { timeout: 30_000 }).toMatch(/1 turn/);
      expect(await row(gone).count()).toBe(0);
      await expect.poll(() => page.$$eval('[data-testid="session-item"]', (els) => els.length)).toBe(1);
    } finally {
      proxy.release();
      await page.close();
      await proxy.close();
    }
  }, 120_000);
});
