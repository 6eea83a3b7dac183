import { once } from "node:events";
import { createServer, type Server } from "node:net";
import type { Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { turnWith } from "../../src/agents/turn-with.js";
import { demoAgentWith } from "../host/host-fixture.js";
import { gate } from "../support/gate.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { hasChromium, NETWORK_FAILURE, newSession, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";

/**
 * The demo agent, except that an answer reaches it only once `release` is called: between the
 * answer and the release its turn runs with nothing pending, long enough to be seen.
 */
function answerHeldAgent() {
  const held = gate();
  const agent = demoAgentWith("answer-held", (turn, demo) => {
    const stopped = new Promise<void>((resolve) =>
      turn.signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    const holding = turnWith(turn, {
      async requestInteraction(request) {
        const resolution = await turn.requestInteraction(request);
        await Promise.race([held.promise, stopped]);
        return resolution;
      },
    });
    return demo.runTurn(holding);
  });
  return { agent, release: held.open };
}

/**
 * Everything the page says about the session's agent, read in one go so the parts are compared
 * as they stand together: the header badge, the list row's pill, the transcript's typing caret.
 */
const shown = (page: Page, sessionId: string) =>
  page.evaluate((id) => {
    const header = document.querySelector('[data-testid="agent-status"]');
    const pill = document.querySelector(`[data-testid="session-item"][data-session-id="${id}"] .state-pill`);
    return {
      connected: document.querySelector('[data-testid="connection"]')?.getAttribute("data-state") === "open",
      header: header?.getAttribute("data-state"),
      headerText: header?.textContent,
      row: pill?.getAttribute("data-state"),
      rowText: pill?.textContent,
      typing: document.querySelector('[data-testid="assistant-message"][data-streaming="true"]') !== null,
      stale: [header?.getAttribute("data-stale") ?? null, pill?.getAttribute("data-stale") ?? null],
    };
  }, sessionId);

const WAITING = {
  connected: true,
  header: "waiting",
  headerText: "waiting for your answer",
  row: "input-required",
  rowText: "needs you",
  typing: false,
  stale: [null, null],
};
const RUNNING = {
  connected: true,
  header: "running",
  headerText: "agent running",
  row: "working",
  rowText: "working",
  typing: true,
  stale: [null, null],
};
const IDLE = {
  connected: true,
  header: "idle",
  headerText: "agent idle",
  row: "completed",
  rowText: "done",
  typing: false,
  stale: [null, null],
};
/** Cut off from the host: the same words, each marked as last known. */
const WAITING_OFFLINE = { ...WAITING, connected: false, stale: ["true", "true"] };

describe.skipIf(!hasChromium)("browser console agent activity", () => {
  const browser = useBrowser();
  const held = answerHeldAgent();
  const fixture = useConsoleHost({ agent: held.agent });
  /** Pages reach the host through this proxy, so the test can take the host out of their reach. */
  let proxy: TcpProxy;
  /** Accepts and drops every connection: where the proxy sends pages while the host is out of reach. */
  let refuser: Server;
  let reachable = true;

  beforeAll(async () => {
    refuser = createServer((socket) => socket.destroy()).listen(0, "127.0.0.1");
    await once(refuser, "listening");
    const refuserPort = (refuser.address() as { port: number }).port;
    proxy = await startTcpProxy(() => (reachable ? fixture.host.port : refuserPort));
  });

  // a test that failed while the host was out of reach does not leave the next one without it
  afterEach(() => {
    reachable = true;
  });

  afterAll(async () => {
    held.release();
    await proxy?.stop();
    refuser?.close();
  });

  it("says the turn waits for an answer in the header, the list row and the transcript alike, in every tab, across a reload and a lost connection; then running, then idle", async () => {
    const url = `http://127.0.0.1:${proxy.port}`;
    const first = await browser.profile.newPage();
    await openConsole(first, url, ADMIN_TOKEN);
    const sessionId = await newSession(first);
    await sendPrompt(first, "/approve deploy");
    await first.waitForSelector('[data-testid="interaction-card"] [data-testid="approve"]:not([disabled])');
    await expect.poll(() => shown(first, sessionId), { timeout: 10_000 }).toEqual(WAITING);

    // A second tab opened now, and the first one reloaded, learn it from the host alone.
    const second = await browser.profile.newPage();
    await openConsole(second, url, ADMIN_TOKEN, sessionId);
    await expect.poll(() => shown(second, sessionId), { timeout: 10_000 }).toEqual(WAITING);
    await first.reload();
    await first.waitForSelector('[data-testid="connection"][data-state="open"]');
    await expect.poll(() => shown(first, sessionId), { timeout: 10_000 }).toEqual(WAITING);

    // Out of the host's reach, neither tab can know what the agent does now: what they show is last known.
    browser.allowConsoleErrors(NETWORK_FAILURE);
    reachable = false;
    proxy.cutAll();
    for (const page of [first, second]) {
      await expect.poll(() => shown(page, sessionId), { timeout: 10_000 }).toEqual(WAITING_OFFLINE);
    }
    reachable = true;
    for (const page of [first, second]) {
      await expect.poll(() => shown(page, sessionId), { timeout: 30_000 }).toEqual(WAITING);
    }

    // Answered in the second tab, the turn runs again in both; at its end both say idle.
    await second.click('[data-testid="interaction-card"] [data-testid="approve"]');
    for (const page of [first, second]) {
      await expect.poll(() => shown(page, sessionId), { timeout: 10_000 }).toEqual(RUNNING);
    }
    held.release();
    for (const page of [first, second]) {
      await expect.poll(() => shown(page, sessionId), { timeout: 10_000 }).toEqual(IDLE);
    }
    await expect
      .poll(() => first.textContent('[data-testid="transcript"]'), { timeout: 10_000 })
      .toContain("Approved: deploy");
    await second.reload();
    await second.waitForSelector('[data-testid="connection"][data-state="open"]');
    await expect.poll(() => shown(second, sessionId), { timeout: 10_000 }).toEqual(IDLE);
    await first.close();
    await second.close();
  });

  it("marks a running job in the live panel as last known while the host is out of reach", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, `http://127.0.0.1:${proxy.port}`, ADMIN_TOKEN);
    await page.click('[data-testid="new-session"]');
    await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).has("s"));
    await sendPrompt(page, "/job 120");
    const job = '[data-testid="jobs"] [data-testid="job"][data-state="running"]';
    await page.waitForSelector(`${job}:not([data-stale])`);

    browser.allowConsoleErrors(NETWORK_FAILURE);
    reachable = false;
    proxy.cutAll();
    await page.waitForSelector(`${job}[data-stale="true"]`);
    reachable = true;
    await page.waitForSelector(`${job}:not([data-stale])`, { timeout: 30_000 });
    await page.close();
  });

  it("marks the queued prompts as last known while the host is out of reach", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, `http://127.0.0.1:${proxy.port}`, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await sendPrompt(page, "/sleep 600000");
    await page.waitForSelector('[data-testid="cancel-turn"]:not([hidden])');
    await sendPrompt(page, "after the sleep");
    const item = '[data-testid="queue-item"]';
    await page.waitForSelector(`${item}:not([data-stale])`);

    browser.allowConsoleErrors(NETWORK_FAILURE);
    reachable = false;
    proxy.cutAll();
    await page.waitForSelector(`${item}[data-stale="true"]`, { timeout: 10_000 });
    expect(await page.getAttribute(item, "title")).toMatch(/Last known/);
    reachable = true;
    await page.waitForSelector(`${item}:not([data-stale])`, { timeout: 30_000 });
    expect(await page.getAttribute(item, "title")).toBeNull();
    await fixture.client.call("session.cancel", { sessionId });
    await page.close();
  });
});
