import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, launchProfile, newSession, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { assistantText, readLog, turnEnds } from "./host-log.js";

const transcriptText = (page: Page) =>
  page.$$eval('[data-testid="assistant-text"]', (els) => els.map((e) => e.textContent ?? "").join(""));

/** Pixels between the transcript's scroll position and its end, read after the next painted frame. */
const distanceFromEnd = (page: Page) =>
  page.evaluate(async () => {
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    const el = document.querySelector<HTMLElement>('[data-testid="transcript"]')!;
    return el.scrollHeight - el.scrollTop - el.clientHeight;
  });

/** Whether the end of the newest answer text is inside the transcript's visible box. */
const lastTextInView = (page: Page) =>
  page.evaluate(() => {
    const box = document.querySelector('[data-testid="transcript"]')!.getBoundingClientRect();
    const texts = document.querySelectorAll('[data-testid="assistant-text"]');
    const last = texts[texts.length - 1]?.getBoundingClientRect();
    return last !== undefined && last.bottom <= box.bottom + 1 && last.bottom > box.top;
  });

/** How many transcripts the console's IndexedDB cache holds, over every partition. */
const cachedSessions = (page: Page) =>
  page.evaluate(
    () =>
      new Promise<number>((resolve, reject) => {
        const open = indexedDB.open("sessionmux-cache");
        open.onupgradeneeded = () => open.result.createObjectStore("entries");
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const db = open.result;
          const all = db.transaction("entries").objectStore("entries").getAllKeys();
          all.onsuccess = () => {
            db.close();
            resolve(all.result.filter((key) => String(key).includes("/s/")).length);
          };
        };
      }),
  );

async function send(page: Page, text: string): Promise<void> {
  await sendPrompt(page, text);
}

describe.skipIf(!hasChromium)("browser console", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  /** Waits for the session's log to hold `count` finished turns; returns the log. */
  async function settled(sessionId: string, count: number) {
    await expect
      .poll(async () => turnEnds(await readLog(fixture.client, sessionId)), { timeout: 30_000 })
      .toBe(count);
    return readLog(fixture.client, sessionId);
  }

  it("streams a /stream 200 10 answer and continues it after a reload mid-stream with no chunk lost or repeated", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    // The token is kept for this tab and gone from the address bar.
    expect(page.url()).not.toContain(ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await send(page, "/stream 200 10");
    await page.waitForSelector('[data-testid="user-message"]');
    await page.waitForSelector(
      '[data-testid="assistant-message"][data-streaming="true"] [data-testid="assistant-text"]',
    );
    const before = await transcriptText(page);
    await page.reload();
    const deltasAtReload = (await readLog(fixture.client, sessionId)).filter(
      (e) => e.type === "assistant/delta",
    ).length;
    // The reload really happened mid-stream.
    expect(before.length).toBeGreaterThan(0);
    expect(deltasAtReload).toBeLessThan(200);
    await page.waitForSelector('[data-testid="connection"][data-state="open"]');
    const log = await settled(sessionId, 1);
    const expected = assistantText(log);
    // The demo agent numbers its chunks, so a lost or repeated chunk shows in the text itself.
    expect(expected).toBe(Array.from({ length: 200 }, (_, i) => `chunk ${i + 1} `).join(""));
    await expect.poll(() => transcriptText(page), { timeout: 15_000 }).toBe(expected);
    expect(expected.startsWith(before)).toBe(true);
    expect(await page.locator('[data-testid="user-message"]').count()).toBe(1);
    await expect.poll(() => page.getAttribute('[data-testid="follow-state"]', "data-mode")).toBe("live");
    await page.close();
  });

  it("shows all 400 chunks of /stream 400 10 once with the last one in view, and offers jump to latest after scrolling up", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await send(page, "/stream 400 10");
    await page.waitForSelector('[data-testid="assistant-message"][data-streaming="true"]');
    // While the answer grows, the view follows it: sampled after a painted frame, never left behind.
    const behind: number[] = [];
    while ((await page.locator('[data-testid="assistant-message"][data-streaming="true"]').count()) > 0) {
      behind.push(await distanceFromEnd(page));
    }
    expect(behind.length).toBeGreaterThan(3);
    expect(Math.max(...behind)).toBeLessThan(80);
    const log = await settled(sessionId, 1);
    const expected = Array.from({ length: 400 }, (_, i) => `chunk ${i + 1} `).join("");
    expect(assistantText(log)).toBe(expected);
    await expect.poll(() => transcriptText(page), { timeout: 15_000 }).toBe(expected);
    expect(await lastTextInView(page)).toBe(true);

    // Scrolled up, the view stays put while the next answer streams and offers a way back.
    await page.hover('[data-testid="transcript"]');
    await page.mouse.wheel(0, -600);
    await expect.poll(() => page.isVisible('[data-testid="jump-latest"]')).toBe(true);
    const scrolledTo = await page.$eval('[data-testid="transcript"]', (el) => el.scrollTop);
    await send(page, "/stream 60 10");
    await settled(sessionId, 2);
    await expect
      .poll(() => transcriptText(page), { timeout: 15_000 })
      .toBe(assistantText(await readLog(fixture.client, sessionId)));
    expect(await page.$eval('[data-testid="transcript"]', (el) => el.scrollTop)).toBe(scrolledTo);
    await page.click('[data-testid="jump-latest"]');
    await expect.poll(() => lastTextInView(page)).toBe(true);
    expect(await page.isVisible('[data-testid="jump-latest"]')).toBe(false);
    await page.close();
  });

  it("caches transcripts in IndexedDB, not localStorage, and forgets them and the token on request", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await send(page, "/stream 5 1");
    await settled(sessionId, 1);
    await expect.poll(() => cachedSessions(page), { timeout: 10_000 }).toBeGreaterThan(0);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    page.once("dialog", (dialog) => void dialog.accept());
    await page.click('[data-testid="forget-browser"]');
    await page.waitForSelector('[data-testid="auth-notice"]:not([hidden])');
    expect(await page.textContent('[data-testid="connection"]')).toContain("No token");
    expect(await cachedSessions(page)).toBe(0);
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await page.close();
  });

  it("answers a question with Enter, closes the rename dialog with Escape, and serves its favicon", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await send(page, "/ask Which region?");
    await page.click('[data-testid="answer-input"]');
    await page.keyboard.type("eu-west");
    await page.keyboard.press("Enter");
    await page.waitForSelector('[data-testid="interaction-resolved"]');
    expect(await page.textContent('[data-testid="interaction-resolved"]')).toContain("Answered: eu-west");
    await settled(sessionId, 1);

    const title = await page.textContent('[data-testid="session-title"]');
    await page.click('[data-testid="rename-session"]');
    await page.waitForSelector('[data-testid="text-dialog"][open]');
    await page.keyboard.type("never saved");
    await page.keyboard.press("Escape");
    await page.waitForSelector('[data-testid="text-dialog"]:not([open])', { state: "attached" });
    expect(await page.evaluate(() => document.activeElement?.getAttribute("data-testid"))).toBe(
      "rename-session",
    );
    expect(await page.textContent('[data-testid="session-title"]')).toBe(title);
    await page.keyboard.press("Enter");
    await page.waitForSelector('[data-testid="text-dialog"][open]');
    await page.fill('[data-testid="text-dialog-input"]', "Regions");
    await page.keyboard.press("Enter");
    await expect.poll(() => page.textContent('[data-testid="session-title"]')).toBe("Regions");

    const icon = await page.$eval('link[rel="icon"]', (el) => (el as HTMLLinkElement).href);
    const response = await page.request.get(icon);
    expect(response.status()).toBe(200);
    expect(response.headers()["content-type"]).toBe("image/svg+xml");
    await page.close();
  });

  it("shows an approval in two tabs and answering it in one removes the card from the other", async () => {
    const first = await browser.profile.newPage();
    await openConsole(first, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(first);
    const second = await browser.profile.newPage();
    await openConsole(second, fixture.host.url, ADMIN_TOKEN, sessionId);
    await send(first, "/approve deploy");
    for (const page of [first, second]) {
      await page.waitForSelector('[data-testid="interaction-card"][data-kind="approval"]');
      expect(await page.textContent('[data-testid="interaction-card"] .card-body')).toContain("deploy");
    }
    await second.click('[data-testid="interaction-card"] [data-testid="approve"]');
    for (const page of [first, second]) {
      await page.waitForSelector('[data-testid="interaction-card"]', { state: "detached" });
      await page.waitForSelector('[data-testid="interaction-resolved"]');
      expect(await page.textContent('[data-testid="interaction-resolved"]')).toContain("Approved");
    }
    const log = await settled(sessionId, 1);
    expect(log.filter((e) => e.type === "interaction/resolved")).toHaveLength(1);
    // the approved call ran: its card no longer holds it
    await expect
      .poll(() => first.textContent('[data-testid="tool-call"] .tool-status'))
      .toMatch(/^ok · \d+ ms$/);
    await first.close();
    await second.close();
  });

  it("shows a tool call waiting for its approval, and stopped before its result, says so", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await send(page, "/approve deploy");
    await page.waitForSelector('[data-testid="interaction-card"][data-kind="approval"]');
    const status = () => page.textContent('[data-testid="tool-call"] .tool-status');
    expect(await status()).toBe("waiting for approval");
    await page.click('[data-testid="cancel-turn"]');
    await page.waitForSelector('[data-testid="turn-flag"][data-state="cancelled"]');
    expect(await status()).toBe("no result: the turn ended");
    const log = await settled(sessionId, 1);
    expect(log.filter((e) => e.type === "tool/result")).toHaveLength(0);
    // a fresh load of the same log draws the same
    await page.reload();
    await page.waitForSelector('[data-testid="turn-flag"][data-state="cancelled"]');
    expect(await status()).toBe("no result: the turn ended");
    await page.close();
  });

  it("ages the list's rows while nothing else changes: a row shown as now says 5m five minutes later", async () => {
    const page = await browser.profile.newPage();
    // the page's Date and timers on a clock this test moves; it runs on from the real time
    await page.clock.install();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    const age = page.locator(
      `[data-testid="session-item"][data-session-id="${sessionId}"] [data-testid="session-item-age"]`,
    );
    await expect.poll(() => age.textContent()).toBe("now");
    await page.clock.fastForward("05:00");
    await expect.poll(() => age.textContent()).toBe("5m");
    await page.close();
  });

  it("rebuilds every known session from the host in a fresh browser profile", async () => {
    const ids: string[] = [];
    for (const text of ["hello there", "/stream 20 5"]) {
      const { header } = await fixture.client.call("session.create", { title: `Seeded: ${text}` });
      await fixture.client.prompt({ sessionId: header.sessionId, text });
      ids.push(header.sessionId);
    }
    const logs = await Promise.all(ids.map((id) => settled(id, 1)));
    const fresh = await launchProfile();
    try {
      const page = await fresh.newPage();
      await openConsole(page, fixture.host.url, ADMIN_TOKEN);
      expect(await cachedSessions(page)).toBe(0);
      for (const [i, id] of ids.entries()) {
        await page.click(`[data-testid="session-item"][data-session-id="${id}"]`);
        await expect.poll(() => transcriptText(page), { timeout: 15_000 }).toBe(assistantText(logs[i]!));
        expect(await page.textContent('[data-testid="session-title"]')).toContain("Seeded");
      }
    } finally {
      await fresh.close();
    }
  });

  it("renames, searches, forks, clears and deletes sessions, and steers a queued prompt into the running turn", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await send(page, "a message about the zebra migration");
    await settled(sessionId, 1);

    // a blank title is not saved: the dialog stays open until there is text or it is cancelled
    await page.click('[data-testid="rename-session"]');
    await page.fill('[data-testid="text-dialog-input"]', "   ");
    await page.press('[data-testid="text-dialog-input"]', "Enter");
    expect(await page.$eval('[data-testid="text-dialog"]', (d) => (d as HTMLDialogElement).open)).toBe(true);
    // nor one of invisible characters only, which the host refuses as blank too
    await page.fill('[data-testid="text-dialog-input"]', "\u200b\u2060");
    await page.press('[data-testid="text-dialog-input"]', "Enter");
    expect(await page.$eval('[data-testid="text-dialog"]', (d) => (d as HTMLDialogElement).open)).toBe(true);
    await page.fill('[data-testid="text-dialog-input"]', "Zebra migration");
    await page.press('[data-testid="text-dialog-input"]', "Enter");
    await expect.poll(() => page.textContent('[data-testid="session-title"]')).toBe("Zebra migration");
    const item = `[data-testid="session-item"][data-session-id="${sessionId}"]`;
    await expect
      .poll(() => page.textContent(`${item} [data-testid="session-item-title"]`))
      .toBe("Zebra migration");

    await page.fill('[data-testid="search"]', "zebra");
    const hit = `[data-testid="search-hit"][data-session-id="${sessionId}"]`;
    await page.waitForSelector(hit);
    // the matched word is marked, not shown between the host's `**` markers
    expect(await page.textContent(`${hit} [data-testid="hit-snippet"]`)).toBe(
      "a message about the zebra migration",
    );
    const marks = await page.$eval(hit, (first) =>
      [...first.querySelectorAll("mark")].map((m) => m.textContent),
    );
    expect(marks).toEqual(["zebra"]);
    await page.fill('[data-testid="search"]', "");

    await page.click('[data-testid="fork-session"]');
    await page.waitForFunction(
      (id) => new URLSearchParams(location.hash.slice(1)).get("s") !== id,
      sessionId,
    );
    const forkId = await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get("s")!);
    await expect
      .poll(() => page.textContent('[data-testid="user-message"] .bubble').catch(() => ""))
      .toBe("a message about the zebra migration");
    // the fork reads like its source in the list; its header names the source and leads back to it
    const origin = '[data-testid="fork-origin"]';
    await expect.poll(() => page.textContent(origin)).toBe("fork of “Zebra migration”");
    await page.click(origin);
    await expect
      .poll(() => page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get("s")))
      .toBe(sessionId);
    await page.waitForSelector(origin, { state: "hidden" });
    await page.click(`[data-testid="session-item"][data-session-id="${forkId}"]`);
    await page.waitForSelector(origin, { state: "visible" });

    page.once("dialog", (dialog) => void dialog.accept());
    await page.click('[data-testid="clear-session"]');
    await page.waitForSelector('[data-testid="user-message"]', { state: "detached" });
    expect((await readLog(fixture.client, forkId)).some((e) => e.type === "user/message")).toBe(false);
    // the cleared log is replayed after the reset, and then the console says it is watching again
    await expect.poll(() => page.getAttribute('[data-testid="follow-state"]', "data-mode")).toBe("live");

    page.once("dialog", (dialog) => void dialog.accept());
    await page.click('[data-testid="delete-session"]');
    await page.waitForSelector('[data-testid="empty-state"]:not([hidden])');
    await page.waitForSelector(`[data-testid="session-item"][data-session-id="${forkId}"]`, {
      state: "detached",
    });
    await expect(fixture.client.call("session.page", { sessionId: forkId })).rejects.toMatchObject({
      code: "session_retired",
    });

    // A prompt sent while a turn runs waits in the queue; Steer delivers it into that turn.
    await page.click(item);
    await send(page, "/sleep 2500");
    await page.waitForSelector(
      '[data-testid="assistant-message"][data-streaming="true"], [data-testid="cancel-turn"]:not([hidden])',
    );
    await send(page, "also check the replicas");
    await page.waitForSelector('[data-testid="queue-item"]');
    await page.click('[data-testid="queue-item"] [data-action="queue-steer"]');
    await page.waitForSelector('[data-testid="queue-item"]', { state: "detached" });
    const interjection = page.locator('[data-testid="user-message"][data-interjection="true"]');
    await expect
      .poll(() => interjection.textContent().catch(() => ""), { timeout: 15_000 })
      .toContain("also check the replicas");
    const log = await settled(sessionId, 2);
    await expect.poll(() => transcriptText(page), { timeout: 10_000 }).toBe(assistantText(log));
    await page.close();
  });
});
