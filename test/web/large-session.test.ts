import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readBackToStart, seedLog } from "./long-log.js";

const TARGET_EVENTS = 10_000;
/** A bound on the seeding loop: about 20 events a turn reach the target in ~500 turns. */
const MAX_TURNS = 1_000;

/** The number of events the console's IndexedDB cache holds for a session (0 when none). */
const cachedEvents = (page: Page, sessionId: string) =>
  page.evaluate(
    (id) =>
      new Promise<number>((resolve, reject) => {
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
              resolve(0);
              return;
            }
            const entry = store.get(key);
            entry.onsuccess = () => {
              open.result.close();
              resolve((entry.result as { events: unknown[] }).events.length);
            };
          };
        };
      }),
    sessionId,
  );

/** Records, from navigation start, when the first transcript row is in the DOM, painted, and the socket open. */
const PAINT_PROBE = `
  window.__probe = {};
  new MutationObserver(() => {
    const p = window.__probe;
    if (p.row === undefined && document.querySelector(".transcript-row")) {
      p.row = performance.now();
      requestAnimationFrame(() => setTimeout(() => (p.painted = performance.now())));
    }
    if (p.open === undefined && document.querySelector('[data-testid="connection"][data-state="open"]')) {
      p.open = performance.now();
    }
  }).observe(document, { subtree: true, childList: true, attributes: true });
`;

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
};

describe.skipIf(!hasChromium)("browser console with a 10,000-event session", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("paints a cached reload from the cache, keeps the DOM small while scrolling end to start, and reports paint and frame times", async () => {
    const { header } = await fixture.client.call("session.create", { title: "Long session" });
    const sessionId = header.sessionId;
    const seeding = Date.now();
    const { head } = await seedLog(fixture.client, sessionId, {
      target: TARGET_EVENTS,
      maxTurns: MAX_TURNS,
      prompt: () => "/stream 16 0",
    });
    console.log(`seeded ${head} events in ${Date.now() - seeding} ms`);
    expect(head).toBeGreaterThanOrEqual(TARGET_EVENTS);

    const page = await browser.profile.newPage();
    await page.addInitScript(PAINT_PROBE);
    await openConsole(page, fixture.host.url, ADMIN_TOKEN, sessionId);
    await expect
      .poll(() => page.getAttribute('[data-testid="follow-state"]', "data-mode"), { timeout: 60_000 })
      .toBe("live");
    // the log is read newest first: scrolled back to its start, the tab holds (and caches) all of it
    await readBackToStart(page, 60_000);
    await expect.poll(() => cachedEvents(page, sessionId), { timeout: 30_000 }).toBe(head);

    await page.reload();
    await expect
      .poll(() => page.evaluate(() => (window as { __probe?: { painted?: number } }).__probe?.painted), {
        timeout: 30_000,
      })
      .toBeDefined();
    const probe = await page.evaluate(
      () => (window as unknown as { __probe: Record<string, number> }).__probe,
    );
    await page.waitForSelector('[data-testid="connection"][data-state="open"]');

    // Scroll from the end to the start, one step a frame, timing the frames; then the same over a
    // plain tall box in the same page: what this (shared) machine gives any page, to read them against.
    const run = await page.evaluate(async () => {
      const frame = () => new Promise<number>((resolve) => requestAnimationFrame(resolve));
      const scrollToStart = async (box: HTMLElement, eachFrame: () => void) => {
        const frames: number[] = [];
        let last = await frame();
        for (let i = 0; i < 400 && box.scrollTop > 0; i++) {
          box.scrollTop = Math.max(0, box.scrollTop - 500);
          const now = await frame();
          frames.push(now - last);
          last = now;
          eachFrame();
        }
        return frames;
      };
      const el = document.querySelector<HTMLElement>('[data-testid="transcript"]')!;
      // Time spent handling each scroll (the view draws the rows it brings into range right then).
      const handling: number[] = [];
      let began = 0;
      document.addEventListener("scroll", () => (began = performance.now()), { capture: true });
      el.addEventListener("scroll", () => handling.push(performance.now() - began));
      let maxRows = 0;
      const frames = await scrollToStart(el, () => {
        maxRows = Math.max(maxRows, el.querySelectorAll(".transcript-row").length);
      });
      const scrollHeight = el.scrollHeight;
      const nodes = document.querySelectorAll("*").length;
      const plain = document.createElement("div");
      plain.style.cssText = "position:fixed;inset:0;overflow:auto;z-index:100;background:#fff";
      plain.innerHTML = `<div style="height:${scrollHeight}px"></div>`;
      document.body.append(plain);
      plain.scrollTop = plain.scrollHeight;
      const baseline = await scrollToStart(plain, () => {});
      plain.remove();
      return { frames, handling, maxRows, scrollHeight, nodes, baseline };
    });
    // At the start, the first prompt is drawn: every row is reachable, not only the last ones.
    await expect
      .poll(() => page.textContent('[data-testid="user-message"] .bubble').catch(() => ""))
      .toBe("/stream 16 0");
    const start = await fixture.client.call("session.page", { sessionId, afterSeq: 0, limit: 10 });
    const firstPrompt = start.events.find((e) => e.type === "user/message")?.seq;
    expect(await page.$eval('[data-testid="user-message"]', (el) => el.getAttribute("data-seq"))).toBe(
      String(firstPrompt),
    );
    const rows = await page.$$eval(".transcript-row", (els) => els.length);
    const turns = start.projection.turnCount;
    expect(turns).toBeGreaterThan(400);
    // Two rows a turn exist in the transcript; only the few near the viewport are in the DOM.
    expect(run.maxRows).toBeLessThan(60);
    expect(rows).toBeLessThan(60);
    expect(run.frames.length).toBeGreaterThan(50);

    // Typing stays cheap with the long session open: the page holds only a few rows.
    // Per key: from the key event to the frame that shows it.
    await page.evaluate(() => {
      const latencies: number[] = [];
      (window as { keyLatencies?: number[] }).keyLatencies = latencies;
      document.querySelector('[data-testid="composer-input"]')!.addEventListener("input", (e) => {
        requestAnimationFrame(() => setTimeout(() => latencies.push(performance.now() - e.timeStamp)));
      });
    });
    await page.click('[data-testid="composer-input"]');
    await page.keyboard.type("x".repeat(50));
    expect(await page.inputValue('[data-testid="composer-input"]')).toBe("x".repeat(50));
    const keys = await page.evaluate(() => (window as { keyLatencies?: number[] }).keyLatencies ?? []);

    console.log(
      `10k-event session (${head} events, ${turns} turns, ${run.scrollHeight} px): cached reload ` +
        `first row ${probe.row?.toFixed(0)} ms, painted ${probe.painted?.toFixed(0)} ms, ` +
        `socket open ${probe.open?.toFixed(0) ?? "after paint"} ms; scroll over ${run.frames.length} frames: ` +
        `p50 ${percentile(run.frames, 50).toFixed(1)} ms, p95 ${percentile(run.frames, 95).toFixed(1)} ms, ` +
        `max ${Math.max(...run.frames).toFixed(1)} ms; scroll handling p50 ${percentile(run.handling, 50).toFixed(1)} ms, ` +
        `p95 ${percentile(run.handling, 95).toFixed(1)} ms (a plain box, same steps: p50 ` +
        `${percentile(run.baseline, 50).toFixed(1)} ms, p95 ${percentile(run.baseline, 95).toFixed(1)} ms); ` +
        `at most ${run.maxRows} rows and ${run.nodes} elements in the DOM; 50 keys typed, ` +
        `key to frame p95 ${percentile(keys, 95).toFixed(1)} ms`,
    );
    await page.close();
  }, 240_000);
});
