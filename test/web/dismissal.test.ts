import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { ALICE_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog, turnEnds } from "./host-log.js";
import { listedSessions } from "./session-list-reads.js";

const row = (sessionId: string) => `[data-testid="session-list"] [data-session-id="${sessionId}"]`;

describe.skipIf(!hasChromium)("console: keep-running dismissal", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();
  let alice: SessionmuxClient;
  beforeAll(() => {
    alice = createNodeClient({ url: fixture.host.wsUrl, token: ALICE_TOKEN });
  });
  afterAll(async () => {
    await alice?.close();
  });

  it("dismissing a row takes it off the list in every tab while its turn keeps running; opening it from the dismissed view restores it first", async () => {
    const kept = (await alice.create({ title: "kept on the list" })).header.sessionId;
    const hidden = (await alice.create({ title: "dismiss me" })).header.sessionId;
    await alice.prompt({ sessionId: hidden, text: "/stream 40 25" });
    const tab = await browser.profile.newPage();
    const other = await browser.profile.newPage();
    await openConsole(tab, fixture.host.url, ALICE_TOKEN);
    await openConsole(other, fixture.host.url, ALICE_TOKEN);
    for (const page of [tab, other]) {
      await page.waitForSelector(row(hidden));
      await page.waitForSelector(row(kept));
    }

    await tab.hover(row(hidden));
    await tab.click(`${row(hidden)} [data-testid="dismiss-session"]`);
    await tab.waitForSelector(row(hidden), { state: "detached" });
    // the other tab of the same principal is told, and drops it too
    await other.waitForSelector(row(hidden), { state: "detached" });
    expect(await listedSessions(other)).toContain(kept);
    const ids = async (dismissed?: true) =>
      (await alice.list({ limit: 200, ...(dismissed ? { dismissed } : {}) })).sessions.map(
        (r) => r.sessionId,
      );
    expect(await ids()).not.toContain(hidden);
    expect(await ids(true)).toEqual([hidden]);

    // keep running: the turn that was streaming ends normally, and the row stays off the list
    await expect.poll(async () => turnEnds(await readLog(alice, hidden)), { timeout: 30_000 }).toBe(1);
    const log = await readLog(alice, hidden);
    expect(log.filter((e) => e.type === "assistant/delta")).toHaveLength(40);
    expect(log.at(-1)?.type === "turn/end" && log.at(-1)?.data).toMatchObject({ state: "completed" });
    expect(await listedSessions(tab)).not.toContain(hidden);

    // the dismissed view lists it; opening it there restores it, then shows it
    await tab.click('[data-testid="show-dismissed"]');
    await tab.waitForSelector('[data-testid="show-dismissed"][aria-pressed="true"]');
    await tab.waitForSelector(`${row(hidden)} [data-testid="restore-session"]`);
    expect(await listedSessions(tab)).toEqual([hidden]);
    await tab.click(`${row(hidden)} [data-testid="session-item-title"]`);
    await tab.waitForSelector('[data-testid="show-dismissed"][aria-pressed="false"]');
    await tab.waitForSelector('[data-testid="session"]:not([hidden])');
    await tab.waitForFunction((id) => new URLSearchParams(location.hash.slice(1)).get("s") === id, hidden);
    await tab.waitForSelector(`${row(hidden)}[aria-current="true"]`);
    await other.waitForSelector(row(hidden));
    expect(await ids(true)).toEqual([]);
    expect(await ids()).toContain(hidden);

    // the restore button puts a dismissed row back without opening it
    await other.hover(row(kept));
    await other.click(`${row(kept)} [data-testid="dismiss-session"]`);
    await tab.waitForSelector(row(kept), { state: "detached" });
    await other.click('[data-testid="show-dismissed"]');
    await other.click(`${row(kept)} [data-testid="restore-session"]`);
    await other.waitForSelector(row(kept), { state: "detached" });
    await other.click('[data-testid="show-dismissed"]');
    await other.waitForSelector(row(kept));
    await tab.waitForSelector(row(kept));
    expect(await ids(true)).toEqual([]);
    await tab.close();
    await other.close();
  });
});
