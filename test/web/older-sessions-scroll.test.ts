import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { decodeFrame } from "../../protocol/codec.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { listedSessions, twoFrames } from "./session-list-reads.js";

const SESSIONS = 120;
/** A bound on the wheel turns that reach the end of the list. */
const MAX_WHEELS = 20;

/** The fields of a sent frame this test reads (protocol-v1 §3). */
interface SentFrame {
  method?: string;
  params?: { before?: string };
}

/** The cursors of the older list pages the page's socket asked for, in order. */
function watchOlderReads(page: Page): string[] {
  const cursors: string[] = [];
  page.on("websocket", (socket) => {
    socket.on("framesent", ({ payload }) => {
      if (typeof payload === "string") return;
      const sent = decodeFrame(new Uint8Array(payload)) as SentFrame;
      if (sent.method === "session.list" && sent.params?.before !== undefined)
        cursors.push(sent.params.before);
    });
  });
  return cursors;
}

describe.skipIf(!hasChromium)("browser console: scrolling the session list to its end", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("loads the next older page once per page, however many scroll events come while it is read", async () => {
    const { client } = fixture;
    for (let i = 1; i <= SESSIONS; i++) await client.call("session.create", { title: `Session ${i}` });
    const { sessions: all } = await client.call("session.list", { limit: 200 });
    const order = all.map((row) => row.sessionId);

    const page = await browser.profile.newPage();
    const cursors = watchOlderReads(page);
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    await expect.poll(async () => (await listedSessions(page)).length).toBe(50);
    expect(cursors).toEqual([]);

    // at the end, with a burst of scroll events before the page's answer can arrive
    await page.$eval('[data-testid="session-list"]', (list) => {
      list.scrollTop = list.scrollHeight;
      for (let i = 0; i < 5; i++) list.dispatchEvent(new Event("scroll"));
    });
    await expect.poll(async () => (await listedSessions(page)).length).toBe(100);
    expect(cursors).toHaveLength(1);

    // the wheel over the list, as a person scrolls
    await page.hover('[data-testid="session-list"]');
    for (let i = 0; i < MAX_WHEELS && (await listedSessions(page)).length < SESSIONS; i++) {
      await page.mouse.wheel(0, 4000);
      await twoFrames(page);
    }
    await expect.poll(() => listedSessions(page)).toEqual(order);
    expect(cursors).toHaveLength(2);
    expect(new Set(cursors).size).toBe(2);
    expect(await page.$('[data-testid="older-sessions"]')).toBe(null);
    await page.close();
  }, 120_000);
});
