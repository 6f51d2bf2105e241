// A real browser for the console's tests: Debian's Chromium (/usr/bin/chromium, `apt-get install chromium`)
// driven by playwright-core, which downloads nothing. Each launch gets a fresh profile directory, removed at
// close. A missing Chromium is installed when the tests run as root (as `npm test` installs the services'
// packages); otherwise the test fails with how to install it. It never skips.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { chromium } from 'playwright-core';
import type { BrowserContext } from 'playwright-core';

import { REPO_ROOT } from './services.js';

/** Where Debian's `chromium` package puts the browser. `CHROMIUM_PATH` overrides it. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** The flags every launch uses: headless, no sandbox (root in CI), nothing that reaches the network. */
export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
] as const;

/** A browser with its own profile. */
export interface TestBrowser {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/**
 * Launches headless Chromium with a fresh `--user-data-dir`. `httpCredentials` answers the console's
 * basic-auth challenge.
 */
export async function launchBrowser(
  options: { httpCredentials?: { username: string; password: string } } = {},
): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM) && process.getuid?.() === 0 && process.env.CHROMIUM_PATH === undefined) {
    // Debian's package, through the same script CI runs (apt waits for a lock another install holds).
    execFileSync('bash', [join(REPO_ROOT, 'scripts/browser/install-chromium.sh')], {
      stdio: 'inherit',
      timeout: 600_000,
    });
  }
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `no Chromium at ${CHROMIUM}: install Debian's package (bash scripts/browser/install-chromium.sh, or apt-get install chromium), or set CHROMIUM_PATH`,
    );
  }
  const profile = mkdtempSync(join(tmpdir(), 'inboxkit-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_FLAGS],
    viewport: { width: 1400, height: 900 },
    ...(options.httpCredentials === undefined ? {} : { httpCredentials: options.httpCredentials }),
  });
  return {
    context,
    async close() {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
