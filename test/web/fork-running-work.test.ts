import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import type { SessionmuxClient } from "../../src/client/node.js";
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
    const source = await busySource(page, host.url);

    const fork = await forkShown(page, source);
    const job = page.locator('[data-testid="transcript"] [data-testid="job"]');
    await expect.poll(() => job.getAttribute("data-state"), { timeout: 10_000 }).toBe("interrupted");
    expect(await job.textContent()).toContain("not carried into this fork");
    const flag = page.locator('[data-testid="turn-flag"]');
    await expect.poll(() => flag.textContent(), { timeout: 10_000 }).toContain("Turn cut off by the fork");
    expect(await page.locator('[data-testid="jobs"] [data-testid="job"]').count()).toBe(0);
    expect(await page.locator('[data-testid="cancel-turn"]').isHidden()).toBe(true);
    // what the fork's log says, for every reader
    expect(await endsOf(client, fork)).toEqual([
      ["turn/end", "completed", undefined],
      ["job/ended", "interrupted", true],
      ["turn/end", "interrupted", true],
    ]);

    // the source runs both on
    await page.click('[data-testid="fork-origin"]');
    await page.waitForSelector('[data-testid="jobs"] [data-testid="job"][data-state="running"]');
    await page.waitForSelector('[data-testid="transcript"] [data-testid="job"][data-state="running"]');
    expect(await page.locator('[data-testid="cancel-turn"]').isHidden()).toBe(false);
    await client.call("session.delete", { sessionId: source });
    await page.close();
  });

  it("shows the work a fork cut off as ended by a fork in a fork of that fork too", async () => {
    const { host, client } = consoleHost;
    const page = await browser.profile.newPage();
    const source = await busySource(page, host.url);
    const first = await forkShown(page, source);
    const job = page.locator('[data-testid="transcript"] [data-testid="job"]');
    await expect.poll(() => job.textContent(), { timeout: 10_000 }).toContain("not carried into this fork");

    const second = await forkShown(page, first);
    await expect
      .poll(() => page.locator('[data-testid="fork-origin"]').getAttribute("data-session-id"))
      .toBe(first);
    await expect.poll(() => job.getAttribute("data-state"), { timeout: 10_000 }).toBe("interrupted");
    expect(await job.textContent()).toContain("not carried into this fork");
    expect(await page.locator('[data-testid="turn-flag"]').textContent()).toContain(
      "Turn cut off by the fork",
    );
    // the second fork copied the first's ends: it had nothing running to end
    expect(await endsOf(client, second)).toEqual(await endsOf(client, first));
    await client.call("session.delete", { sessionId: source });
    await page.close();
  });
});

/** The turn and job ends of a session's log: type, state, and whether a fork wrote them. */
async function endsOf(client: SessionmuxClient, sessionId: string): Promise<unknown[][]> {
  return (await readLog(client, sessionId)).flatMap((e) =>
    e.type === "job/ended" || e.type === "turn/end" ? [[e.type, e.data.state, e.data.byFork]] : [],
  );
}

/** Opens the console on a new session running a job and, after it, a long turn; the session's id. */
async function busySource(page: Page, url: string): Promise<string> {
  await openConsole(page, url, ADMIN_TOKEN);
  const source = await newSession(page);
  await sendPrompt(page, "/job 600");
  await page.waitForSelector('[data-testid="jobs"] [data-testid="job"][data-state="running"]');
  await sendPrompt(page, "/sleep 600000");
  await page.waitForSelector('[data-testid="cancel-turn"]:not([hidden])');
  return source;
}

/** Forks the session shown with the header's Fork button; the fork's id, once the page shows it. */
async function forkShown(page: Page, shown: string): Promise<string> {
  await page.click('[data-testid="fork-session"]');
  await page.waitForFunction((id) => new URLSearchParams(location.hash.slice(1)).get("s") !== id, shown);
  return page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get("s")!);
}
