import { describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, newSession, openConsole, sendPrompt, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog } from "./host-log.js";

/**
 * An answer the host refused for a passing fault (its database away for a moment) leaves the
 * interaction waiting: the card must stay answerable with every button, not keep the pressed one
 * disabled as though the answer were on its way.
 */
describe.skipIf(!hasChromium)("console card whose answer the host refused", () => {
  const browser = useBrowser();
  const consoleHost = useConsoleHost();

  it("says the answer failed, offers the card's buttons again while the host still waits, and takes the next press", async () => {
    const { host, client } = consoleHost;
    const page = await browser.profile.newPage();
    await openConsole(page, host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await sendPrompt(page, "/approve deploy");
    const approve = page.locator('[data-testid="interaction-card"] [data-testid="approve"]');
    await approve.waitFor();
    const refused = vi
      .spyOn(host.store, "resolveInteraction")
      .mockRejectedValueOnce(new SessionmuxError("persistence_failure", "the database is away"));
    try {
      await approve.click();
      await expect
        .poll(() => page.textContent('[data-testid="toast"]'), { timeout: 10_000 })
        .toMatch(/Answer failed \(persistence_failure\)/);
      expect(refused).toHaveBeenCalledTimes(1);
    } finally {
      refused.mockRestore();
    }
    // the host still waits for the answer…
    const resolved = async () =>
      (await readLog(client, sessionId)).filter((e) => e.type === "interaction/resolved").length;
    expect(await resolved()).toBe(0);
    // …and the card says so: both answers can be given again
    const buttons = () =>
      page.$$eval('[data-testid="interaction-card"] button', (els) =>
        els.map((b) => `${b.textContent?.trim()}:${(b as HTMLButtonElement).disabled ? "off" : "on"}`),
      );
    await expect.poll(buttons, { timeout: 5_000 }).toEqual(["Approve:on", "Deny:on"]);
    await approve.click();
    await page.waitForSelector('[data-testid="interaction-resolved"]');
    expect(await page.textContent('[data-testid="interaction-resolved"]')).toContain("Approved");
    await expect.poll(resolved, { timeout: 10_000 }).toBe(1);
    await page.close();
  });

  it("keeps a refused answer's words in the question's box, and Enter there sends them again", async () => {
    const { host, client } = consoleHost;
    const page = await browser.profile.newPage();
    await openConsole(page, host.url, ADMIN_TOKEN);
    const sessionId = await newSession(page);
    await sendPrompt(page, "/ask Which region?");
    const input = page.locator('[data-testid="interaction-card"] [data-testid="answer-input"]');
    await input.fill("eu-west");
    const refused = vi
      .spyOn(host.store, "resolveInteraction")
      .mockRejectedValueOnce(new SessionmuxError("persistence_failure", "the database is away"));
    try {
      await input.press("Enter");
      await expect
        .poll(() => page.textContent('[data-testid="toast"]'), { timeout: 10_000 })
        .toMatch(/Answer failed \(persistence_failure\)/);
    } finally {
      refused.mockRestore();
    }
    const answerable = () =>
      page.$eval('[data-testid="interaction-card"]', (card) => ({
        input: (card.querySelector("input") as HTMLInputElement).disabled ? "off" : "on",
        text: (card.querySelector("input") as HTMLInputElement).value,
        answer: (card.querySelector('[data-testid="answer"]') as HTMLButtonElement).disabled ? "off" : "on",
      }));
    await expect.poll(answerable, { timeout: 5_000 }).toEqual({ input: "on", text: "eu-west", answer: "on" });
    await input.press("Enter");
    await page.waitForSelector('[data-testid="interaction-resolved"]');
    expect(await page.textContent('[data-testid="interaction-resolved"]')).toContain("Answered: eu-west");
    const answers = (await readLog(client, sessionId)).flatMap((e) =>
      e.type === "interaction/resolved" ? [e.data.resolution] : [],
    );
    expect(answers).toEqual([{ answer: "eu-west" }]);
    await page.close();
  });
});
