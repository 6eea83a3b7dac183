import { describe, expect, it } from "vitest";
import { Limits } from "../../protocol/index.js";
import { userMessage } from "../store/open-store.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";

describe.skipIf(!hasChromium)("browser console: a search the host refuses as too broad", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("says too many messages match and shows no hit of the query before", async () => {
    const { host } = fixture;
    await host.store.create({ sessionId: "herd", owner: "admin", model: "demo", title: "Herd" });
    // one past the matches one search ranks: every message holds `walrus`, one holds `kelp`
    for (let written = 0; written <= Limits.maxSearchMatches; written += 500) {
      const count = Math.min(500, Limits.maxSearchMatches + 1 - written);
      await host.store.append(
        "herd",
        Array.from({ length: count }, (_, i) =>
          userMessage(`walrus ${written + i}${written + i === 7 ? " kelp" : ""}`, `w${written + i}`),
        ),
      );
    }
    const page = await browser.profile.newPage();
    await openConsole(page, host.url, ADMIN_TOKEN);
    const hits = () => page.$$eval('[data-testid="search-hit"]', (els) => els.length);
    const headings = () =>
      page.$$eval('[data-testid="search-hits"] .list-heading', (els) => els.map((e) => e.textContent));

    await page.fill('[data-testid="search"]', "kelp");
    await expect.poll(hits).toBe(1);
    await page.fill('[data-testid="search"]', "walrus");
    await expect.poll(headings).toEqual(["Search results", "Too many messages match: add a word"]);
    expect(await hits()).toBe(0);
    // said where the hits go, not as a failure
    expect(await page.isHidden('[data-testid="toast"]')).toBe(true);

    await page.fill('[data-testid="search"]', "walrus kelp");
    await expect.poll(hits).toBe(1);
    expect(await headings()).toEqual(["Search results"]);
    await page.close();
  }, 120_000);
});
