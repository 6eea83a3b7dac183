import type { Page } from "playwright-core";
import { filter, firstValueFrom } from "rxjs";
import { describe, expect, it } from "vitest";
import { controlMirror } from "../../src/client/index.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog } from "./host-log.js";
import { usePageThroughProxy } from "./page-through-proxy.js";

const queuedTexts = (page: Page) =>
  page.$$eval('[data-testid="queue-item"] .queue-text', (els) => els.map((el) => el.textContent));
const steerOffered = (page: Page) =>
  page.$$eval('[data-action="queue-steer"]', (els) => els.map((b) => !(b as HTMLButtonElement).disabled));

/**
 * The console offers Steer for a queued prompt while the session's agent runs a turn, from what it
 * last heard of the host. A proxy between page and host holds what the host's streams and
 * notifications say (answers to calls pass), so the page still shows the prompt queued beside a
 * running turn when the host already moved on; its Steer then reaches a host that refuses it.
 */
describe.skipIf(!hasChromium)("console steer the host refuses", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();
  const throughProxy = usePageThroughProxy(browser, consoleHost);

  /** What the host has queued for the session, as a fresh control stream tells it. */
  const hostQueue = async (sessionId: string) => {
    const mirror = await firstValueFrom(controlMirror(consoleHost.client).pipe(filter((m) => !m.stale)));
    return (mirror.queues[sessionId] ?? []).map((q) => q.text);
  };

  /** A session whose turn waits on an approval, `queued` behind it, shown in a console behind a proxy. */
  async function queuedBehindRunningTurn(queued: string[]) {
    const { page, proxy } = await throughProxy.open();
    await openConsole(page, proxy.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await sendPrompt(page, "/approve deploy");
    await page.waitForSelector('[data-testid="interaction-card"]');
    for (const text of queued) await sendPrompt(page, text);
    await expect.poll(() => queuedTexts(page), { timeout: 10_000 }).toEqual(queued);
    await expect.poll(() => steerOffered(page), { timeout: 10_000 }).toEqual(queued.map(() => true));
    // from here the page hears nothing new of the host's live state or the session's log
    proxy.hold((frame) => frame.type === "item" || frame.type === "end" || frame.type === "event");
    return { page, sessionId, proxy };
  }

  /** Clicks Steer on the queued prompt `text` and waits for the toast. */
  async function steer(page: Page, text: string): Promise<string | null> {
    await page
      .locator('[data-testid="queue-item"]', { hasText: text })
      .locator('[data-action="queue-steer"]')
      .click();
    const toast = page.locator('[data-testid="toast"]');
    await toast.waitFor({ state: "visible", timeout: 10_000 });
    return toast.textContent();
  }

  it("says the host refused a steer of a prompt another client removed, and shows the queue without it", async () => {
    const { page, sessionId, proxy } = await queuedBehindRunningTurn(["first queued", "second queued"]);
    const itemId = await page.getAttribute(
      '[data-testid="queue-item"]:has-text("first queued")',
      "data-item-id",
    );
    await consoleHost.client.call("session.updateQueue", {
      sessionId,
      op: { remove: true, itemId: itemId! },
    });
    // the race: the page still offers the steer the host will refuse
    expect(await queuedTexts(page)).toEqual(["first queued", "second queued"]);

    expect(await steer(page, "first queued")).toMatch(/^Steer failed \(queue_item_not_found\): /);
    proxy.release();
    await expect.poll(() => queuedTexts(page), { timeout: 10_000 }).toEqual(["second queued"]);
    expect(await hostQueue(sessionId)).toEqual(["second queued"]);
    // the turn still runs: the prompt left can be steered
    expect(await steerOffered(page)).toEqual([true]);
    const interjections = (await readLog(consoleHost.client, sessionId)).filter(
      (e) => e.type === "user/message" && e.data.interjection === true,
    );
    expect(interjections).toEqual([]);
  });

  it("says the host refused a steer of a prompt that started when another client ended the turn, and shows what is queued behind it", async () => {
    const { page, sessionId, proxy } = await queuedBehindRunningTurn(["/approve next", "after it"]);
    await consoleHost.client.call("session.cancel", { sessionId });
    // the first queued prompt starts once the turn ended: it is a prompt of the log, queued no more
    const started = async () =>
      (await readLog(consoleHost.client, sessionId)).some(
        (e) => e.type === "user/message" && e.data.text === "/approve next",
      );
    await expect.poll(started, { timeout: 10_000 }).toBe(true);
    expect(await queuedTexts(page)).toEqual(["/approve next", "after it"]);

    expect(await steer(page, "/approve next")).toMatch(/^Steer failed \(queue_item_not_found\): /);
    proxy.release();
    await expect.poll(() => queuedTexts(page), { timeout: 10_000 }).toEqual(["after it"]);
    expect(await hostQueue(sessionId)).toEqual(["after it"]);
    // the prompt that started runs a turn of its own, which takes a steer
    expect(await steerOffered(page)).toEqual([true]);
    const prompts = (await readLog(consoleHost.client, sessionId)).flatMap((e) =>
      e.type === "user/message" ? [`${e.data.text}${e.data.interjection ? " (steered)" : ""}`] : [],
    );
    expect(prompts).toEqual(["/approve deploy", "/approve next"]);
  });
});
