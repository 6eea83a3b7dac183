import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog } from "./host-log.js";

/**
 * A fork copies its source's log, not its agent: a job or a turn still running in the source
 * when the fork is made runs on there alone. The fork must not show them running, nor blame a
 * host stop for their end.
 */
describe.skipIf(!hasChromium)("console fork made while its source works", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();

  it("shows the source's running job and open turn as ended by the fork, while the source keeps running them", async () => {
    const { host, client } = consoleHost;
    const page = await browser.profile.newPage();
    await openConsole(page, host.url, ADMIN_TOKEN);
    const source = await newSession(page);
    await sendPrompt(page, "/job 600");
    await page.waitForSelector('[data-testid="jobs"] [data-testid="job"][data-state="running"]');
    await sendPrompt(page, "/sleep 600000");
    await page.waitForSelector('[data-testid="cancel-turn"]:not([hidden])');

    await page.click('[data-testid="fork-session"]');
    await page.waitForFunction((id) => new URLSearchParams(location.hash.slice(1)).get("s") !== id, source);
    const fork = await page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get("s")!);
    const job = page.locator('[data-testid="transcript"] [data-testid="job"]');
    await expect.poll(() => job.getAttribute("data-state"), { timeout: 10_000 }).toBe("interrupted");
    expect(await job.textContent()).toContain("not carried into this fork");
    const flag = page.locator('[data-testid="turn-flag"]');
    await expect.poll(() => flag.textContent(), { timeout: 10_000 }).toContain("Turn cut off by the fork");
    expect(await page.locator('[data-testid="jobs"] [data-testid="job"]').count()).toBe(0);
    expect(await page.locator('[data-testid="cancel-turn"]').isHidden()).toBe(true);
    // what the fork's log says, for every reader
    const ends = (await readLog(client, fork)).flatMap((e) =>
      e.type === "job/ended" || e.type === "turn/end" ? [[e.type, e.data.state]] : [],
    );
    expect(ends).toEqual([
      ["turn/end", "completed"],
      ["job/ended", "interrupted"],
      ["turn/end", "interrupted"],
    ]);

    // the source runs both on
    await page.click('[data-testid="fork-origin"]');
    await page.waitForSelector('[data-testid="jobs"] [data-testid="job"][data-state="running"]');
    await page.waitForSelector('[data-testid="transcript"] [data-testid="job"][data-state="running"]');
    expect(await page.locator('[data-testid="cancel-turn"]').isHidden()).toBe(false);
    await client.call("session.delete", { sessionId: source });
    await page.close();
  });
});
