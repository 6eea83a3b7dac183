import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { decodeFrame } from "../../protocol/codec.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { HOST_FRAME_LIMITS } from "../support/mux-peer.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog, turnEnds } from "./host-log.js";
import { readBackToStart, seedLog } from "./long-log.js";

const TARGET_EVENTS = 20_000;
/** About 200 events a turn reach the target in ~100 turns. */
const MAX_TURNS = 300;
const prompt = (turn: number) => `/stream 200 0 #${turn}`;

/** One `session.page` the console asked for (its cursor) and the seqs of the events it got. */
interface PageRead {
  params: { afterSeq?: number; beforeSeq?: number };
  seqs: number[];
}

/** The fields of a frame this test reads (protocol-v1 §3). */
interface WireFrame {
  type: string;
  id: number;
  method?: string;
  params?: Record<string, number>;
  value?: { events?: { seq: number }[] };
}

/** Records, from the page's socket, its log reads and where its follow streams start. */
function watchReads(page: Page): { pages: PageRead[]; follows: { afterSeq?: number }[] } {
  const pages: PageRead[] = [];
  const follows: { afterSeq?: number }[] = [];
  const asked = new Map<number, PageRead["params"]>();
  const frame = (payload: string | Buffer) =>
    typeof payload === "string"
      ? undefined
      : (decodeFrame(new Uint8Array(payload), HOST_FRAME_LIMITS) as WireFrame);
  page.on("websocket", (socket) => {
    socket.on("framesent", ({ payload }) => {
      const sent = frame(payload);
      if (sent?.method === "session.page") asked.set(sent.id, sent.params ?? {});
      if (sent?.method === "session.follow") follows.push(sent.params ?? {});
    });
    socket.on("framereceived", ({ payload }) => {
      const got = frame(payload);
      const params = got?.type === "result" ? asked.get(got.id) : undefined;
      if (!params) return;
      asked.delete(got!.id);
      pages.push({ params, seqs: (got!.value?.events ?? []).map((e) => e.seq) });
    });
  });
  return { pages, follows };
}

/** Waits for two frames: what a scroll or a new page changes is drawn by then. */
const frames = (page: Page) =>
  page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));

/** The row at the top of the transcript's view, and where its top is in the view. */
const rowAtTop = (page: Page) =>
  page.evaluate(() => {
    const view = document.querySelector('[data-testid="transcript"]')!.getBoundingClientRect();
    const row = document
      .elementFromPoint(view.left + view.width / 2, view.top + 5)!
      .closest<HTMLElement>(".transcript-row")!;
    return { key: row.dataset.key!, top: row.getBoundingClientRect().top - view.top };
  });

const rowTop = (page: Page, key: string) =>
  page.evaluate((k) => {
    const view = document.querySelector('[data-testid="transcript"]')!.getBoundingClientRect();
    const row = document.querySelector(`.transcript-row[data-key="${CSS.escape(k)}"]`);
    return row ? row.getBoundingClientRect().top - view.top : null;
  }, key);

/** The last prompt drawn in the transcript, as read. */
const lastPrompt = (page: Page) =>
  page.$$eval('[data-testid="user-message"] .bubble', (els) => els.at(-1)?.textContent ?? null);

/** The seqs of the events the console's IndexedDB cache holds for a session. */
const cachedSeqs = (page: Page, sessionId: string) =>
  page.evaluate(
    (id) =>
      new Promise<number[]>((resolve, reject) => {
        const open = indexedDB.open("sessionmux-cache");
        open.onupgradeneeded = () => open.result.createObjectStore("entries");
        open.onerror = () => reject(open.error);
        open.onsuccess = () => {
          const store = open.result.transaction("entries").objectStore("entries");
          const names = store.getAllKeys();
          names.onsuccess = () => {
            const key = names.result.find((k) => String(k).endsWith(`/s/${id}`));
            if (key === undefined) {
              open.result.close();
              resolve([]);
              return;
            }
            const entry = store.get(key);
            entry.onsuccess = () => {
              open.result.close();
              resolve((entry.result as { events: { seq: number }[] }).events.map((e) => e.seq));
            };
          };
        };
      }),
    sessionId,
  );

describe.skipIf(!hasChromium)("browser console with a 20,000-event session", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("shows the newest messages from the log's tail, reads older pages in order as it scrolls up, and follows with no gap or repeat", async () => {
    const { client } = fixture;
    const { header } = await client.call("session.create", { title: "Long session" });
    const sessionId = header.sessionId;
    const { head, turns } = await seedLog(client, sessionId, {
      target: TARGET_EVENTS,
      maxTurns: MAX_TURNS,
      prompt,
    });
    expect(head).toBeGreaterThanOrEqual(TARGET_EVENTS);

    const page = await browser.profile.newPage();
    const reads = watchReads(page);
    await openConsole(page, fixture.host.url, ADMIN_TOKEN, sessionId);
    await expect
      .poll(() => page.getAttribute('[data-testid="follow-state"]', "data-mode"), { timeout: 30_000 })
      .toBe("live");
    expect(await lastPrompt(page)).toBe(prompt(turns));

    // the newest page came first, and what was read is a small part of the log that ends at its head
    expect(reads.pages[0]?.params).not.toHaveProperty("afterSeq");
    expect(reads.pages[0]?.params).not.toHaveProperty("beforeSeq");
    const readFirst = reads.pages.flatMap((p) => p.seqs);
    expect(readFirst.length).toBeLessThan(head / 5);
    expect(Math.max(...readFirst)).toBe(head);
    // the follow stream goes on from the last event read
    expect(reads.follows[0]?.afterSeq).toBe(head);
    await expect.poll(() => page.$('[data-testid="older-events"]').then(Boolean)).toBe(true);

    // a turn after the tail-first load is followed live
    await client.prompt({ sessionId, text: "/stream 3 0 #after" });
    await expect.poll(() => lastPrompt(page), { timeout: 20_000 }).toBe("/stream 3 0 #after");

    await expect
      .poll(async () => turnEnds(await readLog(client, sessionId)), { timeout: 20_000 })
      .toBe(turns + 1);

    // the rows in view stay where they are while an older page is put in front of them
    await page.evaluate(() => {
      document.querySelector('[data-testid="transcript"]')!.scrollTop = 1000;
    });
    await frames(page);
    const before = await rowAtTop(page);
    const pagesRead = reads.pages.length;
    // pressed where it is, out of view: a click that scrolled to it first would move the view itself
    await page.$eval('[data-action="older-events"]', (button) => (button as HTMLButtonElement).click());
    await expect.poll(() => reads.pages.length).toBe(pagesRead + 1);
    await expect.poll(() => page.getAttribute('[data-testid="older-events"]', "data-state")).toBe("more");
    await frames(page);
    const after = await rowTop(page, before.key);
    expect(after).not.toBe(null);
    expect(Math.abs(after! - before.top)).toBeLessThanOrEqual(1);

    const seen = await readBackToStart(page, 120_000);
    expect(seen.outOfOrder).toEqual([]);
    const log = await readLog(client, sessionId);
    const firstPrompt = log.find((e) => e.type === "user/message")!.seq;
    expect(seen.topSeqs.at(-1)).toBe(firstPrompt);
    expect(await page.textContent('[data-testid="user-message"] .bubble')).toBe(prompt(1));

    // every event of the log was read once, by pages that follow one another back to seq 1
    const all = reads.pages.flatMap((p) => p.seqs).sort((a, b) => a - b);
    expect(all).toEqual(Array.from({ length: head }, (_, i) => i + 1));
    for (const read of reads.pages.slice(1)) expect(read.params.beforeSeq).toBeDefined();
    // and the log the tab holds, tail-first read and followed, is the host's whole log, unbroken
    await expect.poll(() => cachedSeqs(page, sessionId), { timeout: 10_000 }).toEqual(log.map((e) => e.seq));
    await page.close();
  }, 300_000);
});
