import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { demoAgentWith } from "../host/host-fixture.js";
import { gate } from "../support/gate.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog } from "./host-log.js";
import { hostOrder, listedSessions, twoFrames } from "./session-list-reads.js";

/** Listed and dismissed sessions, created in turn after the two old ones: more than a page of each. */
const EACH = 70;

/**
 * The demo agent, except that a turn asking for an approval starts only once `approvals` is
 * opened, and one asking a question once `questions` is: a session prompted long ago, and so past
 * the pages loaded, comes to wait on its owner while the console is open.
 */
function heldAgent() {
  const approvals = gate();
  const questions = gate();
  const agent = demoAgentWith("held-start", async (turn, demo) => {
    await (turn.prompt.text.startsWith("/approve") ? approvals : questions).promise;
    return demo.runTurn(turn);
  });
  return { agent, approvals, questions };
}

const WAITING_HEADING = '.list-heading:has-text("Waiting on you")';

describe.skipIf(!hasChromium)(
  "browser console: a session past the pages loaded that comes to wait on you",
  () => {
    const browser = useBrowser();
    const held = heldAgent();
    const fixture = useConsoleHost({ agent: held.agent });

    it("is pinned on the list at once, unless it is dismissed, in every tab", async () => {
      const { client } = fixture;
      const waiting = (await client.call("session.create", { title: "Old, asks for an approval" })).header
        .sessionId;
      await client.prompt({ sessionId: waiting, text: "/approve deploy" });
      const dismissedWaiting = (await client.call("session.create", { title: "Old and dismissed, asks" }))
        .header.sessionId;
      await client.prompt({ sessionId: dismissedWaiting, text: "/ask which one?" });
      await client.call("session.dismiss", { sessionId: dismissedWaiting });
      for (let i = 1; i <= 2 * EACH; i++) {
        const { sessionId } = (await client.call("session.create", { title: `Session ${i}` })).header;
        if (i % 2 === 1) await client.call("session.dismiss", { sessionId });
      }
      const order = await hostOrder(client);
      const dismissedOrder = await hostOrder(client, true);
      // the two are the oldest of their lists: past the first page of each
      expect(order.indexOf(waiting)).toBe(EACH);
      expect(dismissedOrder.indexOf(dismissedWaiting)).toBe(EACH);

      const tabs: Page[] = [];
      for (let i = 0; i < 2; i++) {
        const tab = await browser.profile.newPage();
        await openConsole(tab, fixture.host.url, ADMIN_TOKEN);
        await expect.poll(() => listedSessions(tab)).toEqual(order.slice(0, 50));
        // the control stream's baseline has come: the two working sessions are known, and held aside
        await tab.waitForSelector('[data-testid="session-item"] .state-pill:not([data-stale])');
        tabs.push(tab);
      }
      const inEveryTab = async (expected: (string | undefined)[], pinned: boolean) => {
        for (const tab of tabs) {
          await expect.poll(() => listedSessions(tab)).toEqual(expected);
          expect((await tab.$(WAITING_HEADING)) !== null).toBe(pinned);
        }
      };

      // the dismissed one asks first; once the listed one is pinned, the tabs have placed both
      held.questions.open();
      await expect
        .poll(async () =>
          (await client.call("session.list", { parked: true, dismissed: true })).sessions.map(
            (r) => r.sessionId,
          ),
        )
        .toEqual([dismissedWaiting]);
      held.approvals.open();
      await inEveryTab([waiting, ...order.slice(0, 50)], true);
      for (const tab of tabs) {
        await twoFrames(tab);
        expect(await listedSessions(tab)).not.toContain(dismissedWaiting);
      }

      // dismissed and restored by another client, it goes and comes back pinned
      await client.call("session.dismiss", { sessionId: waiting });
      await inEveryTab(order.slice(0, 50), false);
      await client.call("session.restore", { sessionId: waiting });
      await inEveryTab([waiting, ...order.slice(0, 50)], true);

      // answered, it waits on nobody: it stands past the page loaded again
      const requested = (await readLog(client, waiting)).find((e) => e.type === "interaction/requested");
      if (requested?.type !== "interaction/requested") throw new Error("no approval was asked");
      await client.call("session.respond", {
        interactionId: requested.data.interactionId,
        response: { outcome: "approve" },
      });
      await inEveryTab(order.slice(0, 50), false);

      // the dismissed one, restored, is pinned where the other was
      await client.call("session.restore", { sessionId: dismissedWaiting });
      await inEveryTab([dismissedWaiting, ...order.slice(0, 50)], true);
      for (const tab of tabs) await tab.close();
    }, 120_000);
  },
);
