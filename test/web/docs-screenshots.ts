/**
 * Takes the console screenshots under `docs/`: `npm run docs:screenshots`. Never part of
 * `npm test`, so a test run leaves the tracked images alone. Fails, writing nothing more, when a
 * page throws or logs an error on the way.
 */
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Page } from "playwright-core";
import { createNodeClient } from "../../src/client/node.js";
import { ADMIN_TOKEN, startTestHost } from "../support/host.js";
import { until } from "../support/until.js";
import { launchProfile, openConsole, sendPrompt, takePageErrors } from "./browser.js";
import { buildConsole } from "./console-build.js";
import { readLog, turnEnds } from "./host-log.js";

const docs = fileURLToPath(new URL("../../docs/", import.meta.url));

async function send(page: Page, text: string): Promise<void> {
  await sendPrompt(page, text);
}

async function shoot(page: Page, name: string): Promise<void> {
  takePageErrors();
  await page.screenshot({ path: `${docs}${name}.png` });
  console.log(`docs/${name}.png`);
}

const built = await buildConsole();
const host = await startTestHost({ http: { webRoot: built.webRoot } });
const client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
const profile = await launchProfile();
try {
  mkdirSync(docs, { recursive: true });
  const settled = (sessionId: string, turns: number) =>
    until(async () => turnEnds(await readLog(client, sessionId)) === turns, 30_000, `${turns} turns`);
  for (const [title, text] of [
    ["Summarise yesterday's incidents", "Summarise yesterday's incidents in three bullet points."],
    ["Pick a rollout region", "/ask Which region goes first?"],
  ] as const) {
    const { header } = await client.call("session.create", { title });
    await client.prompt({ sessionId: header.sessionId, text });
  }
  const { header } = await client.call("session.create", { title: "Deploy the staging cluster" });
  const sessionId = header.sessionId;
  const page = await profile.newPage();
  await openConsole(page, host.url, ADMIN_TOKEN, sessionId);
  await send(page, "Check the release notes, then deploy.");
  await settled(sessionId, 1);
  await send(page, "/approve deploy staging");
  await page.waitForSelector('[data-testid="interaction-card"]');
  await page.waitForSelector('[data-testid="session-item"][data-state="input-required"] >> nth=1');
  await shoot(page, "console-approval");
  await page.click('[data-testid="approve"]');
  await settled(sessionId, 2);

  await send(page, "/job 30");
  await until(
    async () =>
      /^([1-9]\d?)%$/.test((await page.textContent('[data-testid="job-percent"]').catch(() => "")) ?? ""),
    30_000,
    "a job in progress",
  );
  await shoot(page, "console-job");

  await page.locator('[data-testid="session-item"]', { hasText: "Summarise yesterday" }).click();
  await page.waitForSelector('[data-testid="assistant-message"]');
  await shoot(page, "console-list");

  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${host.url}/#s=${sessionId}`);
  await page.waitForSelector('[data-testid="job"]');
  await shoot(page, "console-phone");
} finally {
  await profile.close();
  await client.close();
  await host.dispose();
  built.remove();
}
