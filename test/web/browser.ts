import { existsSync } from "node:fs";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll } from "vitest";
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

/**
 * What went wrong inside the pages of the profiles a test file launched: uncaught exceptions and
 * `console.error` messages. Every browser test fails on any of them (see `useBrowser`), so a
 * console that throws while it renders can never pass. A test that provokes a network failure on
 * purpose (a host killed, a token refused) names the console errors it expects with `allow`.
 */
class PageErrors {
  private readonly seen: string[] = [];
  private allowed: RegExp[] = [];

  watch(context: BrowserContext): void {
    const attach = (page: Page) => {
      page.on("pageerror", (error) => this.seen.push(`pageerror on ${page.url()}: ${error.stack ?? error}`));
      page.on("console", (message) => {
        if (message.type() !== "error") return;
        const text = message.text();
        if (this.allowed.some((pattern) => pattern.test(text))) return;
        const where = message.location();
        this.seen.push(`console.error at ${where.url}:${where.lineNumber}: ${text}`);
      });
    };
    for (const page of context.pages()) attach(page);
    context.on("page", attach);
  }

  allow(pattern: RegExp): void {
    this.allowed.push(pattern);
  }

  /** Throws when anything was seen since the last check, then starts over for the next test. */
  check(): void {
    const seen = this.seen.splice(0);
    this.allowed = [];
    if (seen.length > 0) {
      throw new Error(`the console reported ${seen.length} error(s):\n${seen.slice(0, 20).join("\n")}`);
    }
  }
}

const pageErrors = new PageErrors();

/** Throws when a page of any profile threw or logged an error since the last check. */
export const takePageErrors = (): void => pageErrors.check();

/** A headless Chromium with a fresh profile (its own user-data-dir: storage starts empty). */
export async function launchProfile(viewport = { width: 1280, height: 800 }): Promise<BrowserProfile> {
  const dir = tempDir("sessionmux-profile-");
  const context = await chromium.launchPersistentContext(dir.path, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport,
  });
  pageErrors.watch(context);
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

export interface BrowserFixture {
  /** The profile launched before the file's first test. */
  readonly profile: BrowserProfile;
  /** Console errors matching `pattern` are expected in the running test (network failures it causes). */
  allowConsoleErrors(pattern: RegExp): void;
}

/**
 * The shared fixture of every browser test file: one profile for the file, and after each test a
 * check that no page of any profile the test launched threw or logged an error.
 */
export function useBrowser(): BrowserFixture {
  let profile: BrowserProfile | undefined;
  beforeAll(async () => {
    profile = await launchProfile();
  });
  afterEach(takePageErrors);
  afterAll(async () => {
    await profile?.close();
  });
  return {
    get profile() {
      if (!profile) throw new Error("the browser profile is launched in beforeAll");
      return profile;
    },
    allowConsoleErrors: (pattern) => pageErrors.allow(pattern),
  };
}

/** Chromium's own console lines for a socket or request the host refused or never answered. */
export const NETWORK_FAILURE = /WebSocket connection to .* failed|Failed to load resource/;

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

/** Types `text` into the console's composer and sends it with Enter. */
export async function sendPrompt(page: Page, text: string): Promise<void> {
  await page.fill('[data-testid="composer-input"]', text);
  await page.press('[data-testid="composer-input"]', "Enter");
}

/** Starts a session with the console's New session button; its id, once the page shows it. */
export async function newSession(page: Page): Promise<string> {
  await page.click('[data-testid="new-session"]');
  await page.waitForSelector('[data-testid="session"]:not([hidden])');
  await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).has("s"));
  return page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get("s")!);
}
