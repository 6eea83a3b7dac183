import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { hostOrder, listedSessions, showOlder } from "./session-list-reads.js";

/** Listed and dismissed sessions, created in turn so each list's pages span the same times. */
const EACH = 70;

/** The host's order as far as `last`, the end of the page a tab loaded: what that tab must show. */
const upTo = (order: string[], last: string) => order.slice(0, order.indexOf(last) + 1);

const row = (sessionId: string) => `[data-testid="session-list"] [data-session-id="${sessionId}"]`;

describe.skipIf(!hasChromium)(
  "browser console: another client's changes to sessions past the pages loaded",
  () => {
    const browser = useBrowser();
    const fixture = useConsoleHost();

    it("shows a row that comes by a live change only where the pages loaded reach, and each page's rows once", async () => {
      const { client } = fixture;
      for (let i = 1; i <= 2 * EACH; i++) {
        const { sessionId } = (await client.call("session.create", { title: `Session ${i}` })).header;
        if (i % 2 === 1) await client.call("session.dismiss", { sessionId });
      }
      const order = await hostOrder(client);
      const dismissedOrder = await hostOrder(client, true);
      expect([order.length, dismissedOrder.length]).toEqual([EACH, EACH]);

      // one tab on the list, another on the Dismissed view: a page of 50 each
      const list = await browser.profile.newPage();
      await openConsole(list, fixture.host.url, ADMIN_TOKEN);
      await expect.poll(() => listedSessions(list)).toEqual(order.slice(0, 50));
      const dismissedTab = await browser.profile.newPage();
      await openConsole(dismissedTab, fixture.host.url, ADMIN_TOKEN);
      await dismissedTab.click('[data-testid="show-dismissed"]');
      await expect.poll(() => listedSessions(dismissedTab)).toEqual(dismissedOrder.slice(0, 50));
      const listEnd = order[49]!;
      const dismissedEnd = dismissedOrder[49]!;

      // another client restores an old dismissed session, dismisses an old listed one, renames an old
      // one, and creates one; then the Dismissed tab restores one of its page, and the list tab
      // dismisses one of its own
      const restored = dismissedOrder[60]!;
      const dismissed = order[60]!;
      const renamed = order[65]!;
      await client.call("session.restore", { sessionId: restored });
      await client.call("session.dismiss", { sessionId: dismissed });
      await client.call("session.rename", { sessionId: renamed, title: "Renamed far down" });
      const created = (await client.call("session.create", { title: "New on top" })).header.sessionId;
      const restoredInTab = dismissedOrder[5]!;
      await dismissedTab.hover(row(restoredInTab));
      await dismissedTab.click(`${row(restoredInTab)} [data-testid="restore-session"]`);
      const dismissedInTab = order[5]!;
      await list.hover(row(dismissedInTab));
      await list.click(`${row(dismissedInTab)} [data-testid="dismiss-session"]`);

      const nowListed = await hostOrder(client);
      const nowDismissed = await hostOrder(client, true);
      expect(nowListed[0]).toBe(created);
      await expect.poll(() => listedSessions(list)).toEqual(upTo(nowListed, listEnd));
      await expect.poll(() => listedSessions(dismissedTab)).toEqual(upTo(nowDismissed, dismissedEnd));
      for (const id of [restored, dismissed, renamed]) {
        expect(await listedSessions(list)).not.toContain(id);
        expect(await listedSessions(dismissedTab)).not.toContain(id);
      }

      // the next pages bring them, each once, where the host has them
      await showOlder(list);
      await expect.poll(() => listedSessions(list)).toEqual(nowListed);
      expect(await list.textContent(`${row(renamed)} [data-testid="session-item-title"]`)).toBe(
        "Renamed far down",
      );
      await showOlder(dismissedTab);
      await expect.poll(() => listedSessions(dismissedTab)).toEqual(nowDismissed);
      expect(await list.$('[data-testid="older-sessions"]')).toBe(null);
      expect(await dismissedTab.$('[data-testid="older-sessions"]')).toBe(null);
      await list.close();
      await dismissedTab.close();
    }, 120_000);
  },
);
