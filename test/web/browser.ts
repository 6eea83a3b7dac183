import { existsSync } from "node:fs";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { tempDir } from "../support/temp-dir.js";

/** Debian's Chromium; CI installs it with apt-get. Never a downloaded browser. */
export const CHROMIUM = "/usr/bin/chromium";

const ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * The browser suite runs wherever Chromium is installed, and CI always installs it: a missing
 * browser there is a failure, not a skip. Elsewhere the suite is skipped so `npm test` still runs.
 */
export const hasChromium = existsSync(CHROMIUM);
if (!hasChromium && process.env.CI) {
  throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)`);
}

export interface BrowserProfile {
  readonly context: BrowserContext;
  newPage(): Promise<Page>;
  /** Closes the browser and deletes the profile folder. */
  close(): Promise<void>;
}

/** A headless Chromium with a fresh profile (its own user-data-dir: storage starts empty). */
export async function launchProfile(viewport = { width: 1280, height: 800 }): Promise<BrowserProfile> {
  const dir = tempDir("sessionmux-profile-");
  const context = await chromium.launchPersistentContext(dir.path, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport,
  });
  return {
    context,
    async newPage() {
      return context.newPage();
    },
    async close() {
      await context.close();
      dir.remove();
    },
  };
}

/** Opens the console the way `sessionmux serve` prints it: the token in the fragment, once. */
export async function openConsole(
  page: Page,
  baseUrl: string,
  token: string,
  sessionId?: string,
): Promise<void> {
  const fragment = new URLSearchParams({ token });
  if (sessionId) fragment.set("s", sessionId);
  await page.goto(`${baseUrl}/#${fragment.toString()}`);
  await page.waitForSelector('[data-testid="connection"][data-state="open"]');
}
