import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog, turnEnds } from "./host-log.js";

describe.skipIf(!hasChromium)("browser console: a prompt longer than the host takes", () => {
  const browser = useBrowser();
  const fixture = useConsoleHost();

  it("is refused before it is sent, saying how long it is and what the host takes, and keeps the text and the connection", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    // every state other than open the indicator takes from here on: a prompt must never cost the connection
    await page.evaluate(() => {
      const connection = document.querySelector<HTMLElement>('[data-testid="connection"]')!;
      const seen: string[] = [];
      (window as unknown as { connectionStates: string[] }).connectionStates = seen;
      new MutationObserver(() => {
        if (connection.dataset.state !== "open") seen.push(connection.dataset.state ?? "");
      }).observe(connection, {
        attributes: true,
        attributeFilter: ["data-state"],
      });
    });
    const composer = '[data-testid="composer-input"]';
    const toast = page.locator('[data-testid="toast"]');

    // 65,536 bytes of UTF-8 in 32,768 characters: the most the host's decoder takes, sent
    await page.fill(composer, "é".repeat(32_768));
    await page.press(composer, "Enter");
    await expect
      .poll(async () => turnEnds(await readLog(fixture.client, sessionId)), { timeout: 30_000 })
      .toBe(1);
    expect(await page.inputValue(composer)).toBe("");
    const head = (await readLog(fixture.client, sessionId)).length;

    // two bytes more (one character): the host would refuse it as a bad frame
    const over = "é".repeat(32_769);
    await page.fill(composer, over);
    await page.press(composer, "Enter");
    await toast.waitFor({ state: "visible" });
    expect(await toast.textContent()).toBe(
      "This message is 65 KiB long; the host takes at most 64 KiB of text in one message. Shorten it or send it in parts: nothing was sent.",
    );
    expect(await page.inputValue(composer)).toBe(over);

    // past the 1 MiB frame limit the host closes the socket, and a sent prompt is sent again on
    // every reconnect: it is never sent
    const huge = "x".repeat(1_100_000);
    await page.fill(composer, huge);
    await page.press(composer, "Enter");
    await page.waitForFunction(() =>
      document
        .querySelector('[data-testid="toast"]')
        ?.textContent?.startsWith("This message is 1,075 KiB long;"),
    );
    expect(await page.inputValue(composer)).toBe(huge);
    // a call made after the refusals still goes through the same socket
    await page.click('[data-testid="rename-session"]');
    await page.fill('[data-testid="text-dialog-input"]', "still connected");
    await page.press('[data-testid="text-dialog-input"]', "Enter");
    await expect.poll(() => page.textContent('[data-testid="session-title"]')).toBe("still connected");
    expect(
      await page.evaluate(() => (window as unknown as { connectionStates: string[] }).connectionStates),
    ).toEqual([]);
    expect((await readLog(fixture.client, sessionId)).filter((e) => e.type === "user/message")).toHaveLength(
      1,
    );
    expect((await readLog(fixture.client, sessionId)).length).toBe(head + 1); // the rename
    await page.close();
  });
});

describe.skipIf(!hasChromium)("browser console: a host that reads longer or shorter strings", () => {
  const browser = useBrowser();
  // the frame limit stays the default 1 MiB: the string limit is the one that moves
  const fixture = useConsoleHost({ mux: { decodeLimits: { maxStrBytes: 200 * 1024 } } });

  it("takes the limit the host's hello announces, not the default one", async () => {
    const page = await browser.profile.newPage();
    await openConsole(page, fixture.host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    const composer = '[data-testid="composer-input"]';
    const toast = page.locator('[data-testid="toast"]');

    // 100 KiB: past the default limit, within this host's
    await page.fill(composer, "x".repeat(100 * 1024));
    await page.press(composer, "Enter");
    await expect
      .poll(async () => turnEnds(await readLog(fixture.client, sessionId)), { timeout: 30_000 })
      .toBe(1);
    expect(await toast.isVisible()).toBe(false);

    const over = "x".repeat(200 * 1024 + 1);
    await page.fill(composer, over);
    await page.press(composer, "Enter");
    await toast.waitFor({ state: "visible" });
    expect(await toast.textContent()).toBe(
      "This message is 201 KiB long; the host takes at most 200 KiB of text in one message. Shorten it or send it in parts: nothing was sent.",
    );
    expect(await page.inputValue(composer)).toBe(over);
    expect((await readLog(fixture.client, sessionId)).filter((e) => e.type === "user/message")).toHaveLength(
      1,
    );
    await page.close();
  });
});
