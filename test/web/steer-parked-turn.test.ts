import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { hasChromium, NETWORK_FAILURE, newSession, openConsole, useBrowser } from "./browser.js";
import { readLog } from "./host-log.js";
import { useSpawnedHosts } from "./spawned-host.js";

const TOKEN = "steer-parked-token";

/**
 * A turn waiting on an approval when its host stops stays open, parked, with no agent running it
 * until the approval is answered: the host refuses a steer into it (`agent_not_live`), so the
 * console must not offer Steer then, only to fail.
 */
describe.skipIf(!hasChromium)("console Steer into a turn parked by a host restart", () => {
  const browser = useBrowser();
  const hosts = useSpawnedHosts(TOKEN);

  it("is offered while the agent runs the waiting turn, not once a restart parked it (says why), and the queue runs after the answer", async () => {
    const first = await hosts.start(0);
    const url = `http://127.0.0.1:${first.port}`;
    const page = await browser.profile.newPage();
    await openConsole(page, url, TOKEN);
    const sessionId = await newSession(page);
    const composer = '[data-testid="composer-input"]';
    await page.fill(composer, "/approve deploy");
    await page.press(composer, "Enter");
    await page.waitForSelector('[data-testid="interaction-card"] [data-testid="approve"]:not([disabled])');
    await page.fill(composer, "held back");
    await page.press(composer, "Enter");
    const steer = page.locator('[data-testid="queue-item"] [data-action="queue-steer"]');
    // the agent that asked still runs the turn: a steer would be taken when it goes on
    await expect.poll(() => steer.isDisabled(), { timeout: 10_000 }).toBe(false);

    browser.allowConsoleErrors(NETWORK_FAILURE);
    const exited = once(first.child, "exit");
    first.child.kill("SIGTERM");
    await exited;
    const second = await hosts.start(first.port);
    await page.waitForSelector('[data-testid="connection"][data-state="open"]', { timeout: 20_000 });

    const client = createNodeClient({ url: `ws://127.0.0.1:${second.port}/api/remote.mux`, token: TOKEN });
    try {
      const itemId = await page.locator('[data-testid="queue-item"]').getAttribute("data-item-id");
      // what the host says to a steer now: no agent runs the parked turn to take it
      const refusal = await client
        .call("session.updateQueue", { sessionId, op: { steer: true, itemId: itemId! } })
        .then(
          () => "steered",
          (error: { code?: string }) => error.code,
        );
      expect(refusal).toBe("agent_not_live");
      await expect.poll(() => steer.isDisabled(), { timeout: 20_000 }).toBe(true);
      expect(await steer.getAttribute("title")).toMatch(/until you answer/);
      // edit and remove change the durable queue without an agent: still offered
      for (const other of ["queue-edit", "queue-remove"])
        expect(await page.locator(`[data-testid="queue-item"] [data-action="${other}"]`).isDisabled()).toBe(
          false,
        );

      // a prompt attaches the agent, which holds the parked turn without running it
      await page.fill(composer, "and this");
      await page.press(composer, "Enter");
      await expect.poll(() => steer.count(), { timeout: 10_000 }).toBe(2);
      await expect
        .poll(() => page.locator('[data-testid="agent-status"]').getAttribute("data-state"))
        .toBe("waiting");
      for (const button of await steer.all()) {
        expect(await button.isDisabled()).toBe(true);
        expect(await button.getAttribute("title")).toMatch(/until you answer/);
      }

      await page.click('[data-testid="approve"]');
      const userTexts = async () =>
        (await readLog(client, sessionId)).flatMap((e) => (e.type === "user/message" ? [e.data.text] : []));
      await expect.poll(userTexts, { timeout: 20_000 }).toEqual(["/approve deploy", "held back", "and this"]);
      await expect.poll(() => steer.count(), { timeout: 10_000 }).toBe(0);
      expect(await page.textContent('[data-testid="toast"]')).not.toMatch(/Steer failed/);
    } finally {
      await client.close();
    }
    await page.close();
  });
});
