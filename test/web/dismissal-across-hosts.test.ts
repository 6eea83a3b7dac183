import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { ALICE_TOKEN, TEST_TOKENS } from "../support/host.js";
import { MuxPeer } from "../support/mux-peer.js";
import { schemaHosts } from "../support/schema-hosts.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { buildConsole } from "./console-build.js";
import { listedSessions } from "./session-list-reads.js";

/**
 * Two hosts on one PostgreSQL schema, a console tab of alice on each: a row she dismisses in one
 * tab leaves the list of the other, and comes back there when she restores it, without a reload.
 */
const pgUrl = inject("pgUrl") ?? "";
const row = (sessionId: string) => `[data-testid="session-list"] [data-session-id="${sessionId}"]`;

describe.skipIf(!hasChromium || !pgUrl)("console: a dismissal made through another host", () => {
  const browser = useBrowser();
  const cleanups = cleanupsAfterEach();
  let built: { webRoot: string; remove(): void } | undefined;
  beforeAll(async () => {
    built = await buildConsole();
  });
  afterAll(() => built?.remove());

  it("the other host's tab moves the row off the list and back", async () => {
    const { start } = schemaHosts(pgUrl, "console_dismissal", TEST_TOKENS, cleanups, {
      http: { webRoot: built!.webRoot },
    });
    const near = await start("host-near");
    const far = await start("host-far");
    const alice = createNodeClient({ url: near.wsUrl, token: ALICE_TOKEN });
    cleanups.push(() => alice.close());
    const kept = (await alice.create({ title: "kept on the list" })).header.sessionId;
    const hidden = (await alice.create({ title: "dismiss me" })).header.sessionId;
    const tab = await browser.profile.newPage();
    const other = await browser.profile.newPage();
    await openConsole(tab, near.url, ALICE_TOKEN);
    await openConsole(other, far.url, ALICE_TOKEN);
    for (const page of [tab, other]) {
      await page.waitForSelector(row(hidden));
      await page.waitForSelector(row(kept));
    }

    await tab.hover(row(hidden));
    await tab.click(`${row(hidden)} [data-testid="dismiss-session"]`);
    await tab.waitForSelector(row(hidden), { state: "detached" });
    // the tab on the other host is told, and drops it too
    await other.waitForSelector(row(hidden), { state: "detached", timeout: 10_000 });
    expect(await listedSessions(other)).toContain(kept);

    // restored through the first host by another client of hers
    const peer = await MuxPeer.connect(near.wsUrl, { token: ALICE_TOKEN });
    await peer.call("session.restore", { sessionId: hidden });
    await peer.disconnect();
    await other.waitForSelector(row(hidden), { timeout: 10_000 });
    await tab.waitForSelector(row(hidden), { timeout: 10_000 });
    await tab.close();
    await other.close();
  }, 60_000);
});
