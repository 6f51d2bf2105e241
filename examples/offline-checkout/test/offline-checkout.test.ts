// The example page in Chromium against its server on real Postgres: a double click is one order; orders placed
// offline wait on the device and are each applied once when the network returns. Set
// INBOXKIT_CLIENT_SCREENSHOTS=docs/client to refresh the screenshot of docs/client.md.

import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kysely, PostgresDialect } from 'kysely';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type TestBrowser } from '../../../packages/cli/test/support/browser.js';
import { eventually } from '../../../test/support/eventually.js';
import { createTestSchema, requireService, type TestSchema } from '../../../test/support/services.js';
import { startCheckoutServer, type CheckoutDatabase, type CheckoutServer } from '../src/checkout-server.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
let schema: TestSchema;
let db: Kysely<CheckoutDatabase>;
let server: CheckoutServer;
let browser: TestBrowser;
let page: Page;

beforeAll(async () => {
  requireService('postgres');
  schema = await createTestSchema('offline_checkout', { max: 10 });
  schema.pool.on('error', () => undefined);
  db = new Kysely<CheckoutDatabase>({ dialect: new PostgresDialect({ pool: schema.pool }) });
  server = await startCheckoutServer({ db, schema: schema.schema });
  browser = await launchBrowser();
  page = await browser.context.newPage();
  await page.setViewportSize({ width: 900, height: 560 });
  await page.goto(server.url);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await schema?.cleanup();
});

const orders = async () =>
  (await db.selectFrom('orders').selectAll().orderBy('id').execute()).map((o) => o.item);
const states = () => page.locator('#intents .state').allTextContents();

describe('examples/offline-checkout in Chromium', () => {
  it('a double click places one order', async () => {
    await page.dblclick('#place');
    await eventually(async () => (await states()).join() === 'succeeded', 60_000);
    expect(await orders()).toEqual(['Coffee beans, 1 kg']);
  });

  it('orders placed offline wait on the device and are applied once each when back online', async () => {
    await browser.context.setOffline(true);
    await page.selectOption('#item', 'Grinder');
    await page.click('#place');
    await page.selectOption('#item', 'Espresso cups (6)');
    await page.fill('#quantity', '2');
    await page.click('#place');
    await eventually(async () => (await states()).join() === 'pending,waiting-for-network,succeeded', 60_000);
    const shots = process.env.INBOXKIT_CLIENT_SCREENSHOTS;
    if (shots) {
      mkdirSync(resolve(ROOT, shots), { recursive: true });
      await page.screenshot({ path: join(resolve(ROOT, shots), 'offline-checkout.png') });
    }
    expect(await orders()).toEqual(['Coffee beans, 1 kg']);
    await browser.context.setOffline(false);
    await eventually(async () => (await states()).join() === 'succeeded,succeeded,succeeded', 60_000);
    expect(await orders()).toEqual(['Coffee beans, 1 kg', 'Grinder', 'Espresso cups (6)']);
  });
});
