import type { ChildProcess } from "node:child_process";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { tempDir } from "../support/temp-dir.js";
import { hasChromium, NETWORK_FAILURE, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { buildConsole } from "./console-build.js";
import { killHost, spawnHost } from "./spawned-host.js";

const FIRST_TOKEN = "token-of-the-first-run";
const SECOND_TOKEN = "token-of-the-second-run";

const connectionState = (page: Page) => page.getAttribute('[data-testid="connection"]', "data-state");
const isDisabled = (page: Page, selector: string) =>
  page.$eval(selector, (el) => (el as HTMLButtonElement).disabled);
const staleMark = (page: Page, testId: string) =>
  page.getAttribute(`[data-testid="${testId}"]`, "data-stale");

/**
 * Everything that would need the host: none of it may look usable while the host cannot be
 * reached. The indicator changes at once and the rest at the next animation frame, so each is
 * polled for a moment rather than read once right after the indicator changed.
 */
async function expectActionsDisabled(page: Page): Promise<void> {
  for (const id of [
    "approve",
    "deny",
    "send",
    "new-session",
    "rename-session",
    "fork-session",
    "delete-session",
  ]) {
    await expect
      .poll(() => isDisabled(page, `[data-testid="${id}"]`), { message: id, timeout: 2_000 })
      .toBe(true);
  }
  await expect.poll(() => staleMark(page, "follow-state"), { timeout: 2_000 }).toBe("true");
  await expect.poll(() => staleMark(page, "agent-status"), { timeout: 2_000 }).toBe("true");
}

describe.skipIf(!hasChromium)("browser console connection states", () => {
  const dir = tempDir();
  const browser = useBrowser();
  let webRoot: string;
  let removeBuild: () => void;
  let host: TestHost;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    const built = await buildConsole();
    webRoot = built.webRoot;
    removeBuild = built.remove;
    host = await startTestHost({ http: { webRoot } });
  });

  afterAll(async () => {
    for (const child of children) await killHost(child);
    await host?.dispose();
    removeBuild?.();
    dir.remove();
  });

  it("shows a host restarted with a new token as refused, with stale badges and disabled actions, and continues with the new token without a reload", async () => {
    const dbPath = dir.file("sessions.db");
    const first = await spawnHost(0, dbPath, FIRST_TOKEN, webRoot);
    children.push(first.child);
    const page = await browser.profile.newPage();
    await openConsole(page, `http://127.0.0.1:${first.port}`, FIRST_TOKEN);
    await page.click('[data-testid="new-session"]');
    await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).has("s"));
    await sendPrompt(page, "/approve deploy");
    await page.waitForSelector('[data-testid="interaction-card"] [data-testid="approve"]:not([disabled])');
    await page.waitForSelector('[data-testid="agent-status"]:not([data-stale])');
    expect(await page.textContent('[data-testid="follow-state"]')).toBe("live");

    // Every change of the indicator is recorded with the approve button as it stands at that moment.
    await page.evaluate(() => {
      const seen: { state: string | null; approveDisabled: boolean | undefined }[] = [];
      (window as { indicatorChanges?: typeof seen }).indicatorChanges = seen;
      const indicator = document.querySelector('[data-testid="connection"]')!;
      new MutationObserver(() => {
        const approve = document.querySelector<HTMLButtonElement>(
          '[data-testid="interaction-card"] [data-testid="approve"]',
        );
        seen.push({ state: indicator.getAttribute("data-state"), approveDisabled: approve?.disabled });
      }).observe(indicator, { attributes: true, attributeFilter: ["data-state"] });
    });

    browser.allowConsoleErrors(NETWORK_FAILURE);
    await killHost(first.child);
    await expect.poll(() => connectionState(page), { timeout: 20_000 }).toBe("backoff");
    await expectActionsDisabled(page);
    // Not even for a frame did the indicator say offline beside an approve button still usable.
    const changes = await page.evaluate(
      () =>
        (window as { indicatorChanges?: { state: string | null; approveDisabled?: boolean }[] })
          .indicatorChanges!,
    );
    expect(changes.map((c) => c.state)).toContain("backoff");
    expect(changes.filter((c) => c.state !== "open" && c.approveDisabled !== true)).toEqual([]);

    const second = await spawnHost(first.port, dbPath, SECOND_TOKEN, webRoot);
    children.push(second.child);
    await expect.poll(() => connectionState(page), { timeout: 30_000 }).toBe("unauthorized");
    expect(await page.isVisible('[data-testid="auth-notice"]')).toBe(true);
    expect(await page.textContent('[data-testid="auth-message"]')).toContain("401");
    expect(await page.textContent('[data-testid="connection"]')).toContain("Token refused");
    await expectActionsDisabled(page);

    // The same document goes on: no reload, the shown session comes back on the new connection.
    await page.evaluate(() => {
      (window as { sameDocument?: boolean }).sameDocument = true;
    });
    await page.fill('[data-testid="token-input"]', SECOND_TOKEN);
    await page.press('[data-testid="token-input"]', "Enter");
    await expect.poll(() => connectionState(page), { timeout: 20_000 }).toBe("open");
    expect(await page.evaluate(() => (window as { sameDocument?: boolean }).sameDocument)).toBe(true);
    expect(await page.isVisible('[data-testid="auth-notice"]')).toBe(false);
    // The host restarted while the turn waited on an approval: the approval is durable, still
    // answerable on the new host, and answering it finishes the turn.
    await page.waitForSelector('[data-testid="interaction-card"] [data-testid="approve"]:not([disabled])', {
      timeout: 20_000,
    });
    await page.click('[data-testid="interaction-card"] [data-testid="approve"]');
    await expect
      .poll(() => page.textContent('[data-testid="transcript"]'), { timeout: 20_000 })
      .toContain("Approved: deploy");
    await page.waitForSelector('[data-testid="send"]:not([disabled])');
    await sendPrompt(page, "/stream 5 10");
    await expect
      .poll(() => page.textContent('[data-testid="transcript"]'), { timeout: 20_000 })
      .toContain("chunk 5");
    expect(await page.textContent('[data-testid="follow-state"]')).toBe("live");
    expect(await staleMark(page, "follow-state")).toBeNull();
    await page.close();
  });

  it("shows a wrong token in the printed URL as refused instead of retrying, and connects once the right one is entered", async () => {
    browser.allowConsoleErrors(NETWORK_FAILURE);
    const page = await browser.profile.newPage();
    await page.goto(`${host.url}/#token=WRONG`);
    await expect.poll(() => connectionState(page), { timeout: 20_000 }).toBe("unauthorized");
    expect(await page.isVisible('[data-testid="auth-notice"]')).toBe(true);
    expect(await page.textContent('[data-testid="connection"]')).not.toContain("retrying");
    await expect.poll(() => isDisabled(page, '[data-testid="new-session"]'), { timeout: 2_000 }).toBe(true);
    // The token input has the focus: typing the right one and Enter is all it takes.
    await page.keyboard.type(ADMIN_TOKEN);
    await page.keyboard.press("Enter");
    await expect.poll(() => connectionState(page), { timeout: 20_000 }).toBe("open");
    await expect.poll(() => isDisabled(page, '[data-testid="new-session"]'), { timeout: 2_000 }).toBe(false);
    await page.close();
  });

  it("opens a printed URL with a new token in the same tab without a reload", async () => {
    browser.allowConsoleErrors(NETWORK_FAILURE);
    const page = await browser.profile.newPage();
    await page.goto(`${host.url}/#token=WRONG`);
    await expect.poll(() => connectionState(page), { timeout: 20_000 }).toBe("unauthorized");
    await page.evaluate(() => {
      (window as { sameDocument?: boolean }).sameDocument = true;
    });
    await page.evaluate((token) => {
      location.hash = `token=${encodeURIComponent(token)}`;
    }, ADMIN_TOKEN);
    await expect.poll(() => connectionState(page), { timeout: 20_000 }).toBe("open");
    expect(await page.evaluate(() => (window as { sameDocument?: boolean }).sameDocument)).toBe(true);
    expect(page.url()).not.toContain(ADMIN_TOKEN);
    await page.close();
  });
  it("says a token whose principal holds the most sockets allowed is refused for that, keeps retrying, and connects once one frees up", async () => {
    const crowded = await startTestHost({ http: { webRoot }, principals: { maxSocketsPerPrincipal: 1 } });
    // another client of alice's holds her one socket
    const holder = createNodeClient({ url: crowded.wsUrl, token: ALICE_TOKEN });
    try {
      await holder.list();
      const page = await browser.profile.newPage();
      await page.goto(`${crowded.url}/#token=${ALICE_TOKEN}`);
      await expect
        .poll(() => page.textContent('[data-testid="connection"] .connection-label'), { timeout: 20_000 })
        .toMatch(/^Too many connections · retrying in \d+s$/);
      expect(await connectionState(page)).toBe("backoff");
      expect(await page.isVisible('[data-testid="auth-notice"]')).toBe(false);
      await expect.poll(() => isDisabled(page, '[data-testid="new-session"]'), { timeout: 2_000 }).toBe(true);
      await holder.close();
      await expect.poll(() => connectionState(page), { timeout: 20_000 }).toBe("open");
      await expect
        .poll(() => isDisabled(page, '[data-testid="new-session"]'), { timeout: 2_000 })
        .toBe(false);
      await page.close();
    } finally {
      await holder.close();
      await crowded.dispose();
    }
  });

  it("leaves `open` within the probe's wait when the browser goes offline, says there is no network, and connects again as soon as it is back", async () => {
    browser.allowConsoleErrors(NETWORK_FAILURE);
    const page = await browser.profile.newPage();
    await openConsole(page, host.url, ADMIN_TOKEN);
    const { context } = browser.profile;
    try {
      // Chromium holds the socket's frames while offline: only the probe the `offline` event sends
      // finds the path dead, after its 5 s wait; the quiet wait alone would take 10 s more.
      await context.setOffline(true);
      await expect.poll(() => connectionState(page), { timeout: 11_000 }).not.toBe("open");
      await expect.poll(() => isDisabled(page, '[data-testid="new-session"]'), { timeout: 2_000 }).toBe(true);
      // its reconnects fail while the browser knows of no network, and the indicator says why
      await expect
        .poll(() => page.textContent('[data-testid="connection"] .connection-label'), { timeout: 10_000 })
        .toMatch(/^No network · retrying in \d+s$/);
    } finally {
      await context.setOffline(false);
    }
    await expect.poll(() => connectionState(page), { timeout: 20_000 }).toBe("open");
    await expect.poll(() => isDisabled(page, '[data-testid="new-session"]'), { timeout: 2_000 }).toBe(false);
    await page.close();
  });
});
