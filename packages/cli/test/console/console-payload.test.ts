// What the console shows of a message and what it sends back, in Chromium over real Postgres and RabbitMQ:
// edit and retry starts from the DLQ copy's own text (an account id beyond 2^53 is not rounded by a
// re-serialisation), the server refuses a payload whose numbers changed where JavaScript cannot tell them
// apart, and ids, reasons and errors with bidi or invisible characters are shown by the CLI's display rule.

import { fingerprintJson } from '@inboxkit/core';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ConsoleServer } from '../../src/console/console-server.js';
import { displayName, displayText } from '../../src/output/display-text.js';
import { launchBrowser } from '../support/browser.js';
import type { TestBrowser } from '../support/browser.js';
import { consoleWorld } from '../support/console-fixture.js';
import type { ConsoleWorld } from '../support/console-fixture.js';
import { eventually } from '../support/eventually.js';

const ACCOUNT = '1234567890123456789';
/** A negative amount (schema-invalid, dead-lettered) next to an account id no double holds. */
const bodyOf = (id: string) => `{"orderId":"${id}","amountCents":-100,"accountId":${ACCOUNT}}`;
const SPOOFED = 'invoice-\u202egpj.exe';

describe('what the console shows of a message, and sends back (Chromium, real Postgres and RabbitMQ)', () => {
  let world: ConsoleWorld;
  let server: ConsoleServer;
  let browser: TestBrowser;
  let page: Page;
  let dlq: string;

  beforeAll(async () => {
    world = await consoleWorld();
    world.refused.add(SPOOFED);
    await world.broker.publish([
      { id: 'big-1', body: bodyOf('big-1') },
      { id: 'big-2', body: bodyOf('big-2') },
      { id: SPOOFED, body: JSON.stringify({ orderId: SPOOFED, amountCents: 1 }) },
    ]);
    await eventually(
      async () => (await world.broker.dlqDepth()) === 3,
      async () => `DLQ depth ${await world.broker.dlqDepth()}, expected 3`,
      60_000,
    );
    server = await world.console();
    dlq = `rabbitmq:${world.broker.dlq}`;
    browser = await launchBrowser();
    page = await browser.context.newPage();
    await page.goto(server.url);
  }, 600_000);

  afterAll(async () => {
    await browser?.close();
    await world?.dispose();
  });

  const dlqHolds = (n: number) =>
    eventually(
      async () => (await world.broker.dlqDepth()) === n,
      async () => `DLQ depth ${await world.broker.dlqDepth()}, expected ${n}`,
    );

  it('edits the DLQ copy as it was written: an id beyond 2^53 reaches the consumer unchanged', async () => {
    await expect.poll(() => page.locator('#dlq-table tbody tr').count(), { timeout: 20_000 }).toBe(3);
    await page.click('#dlq-table tbody tr[data-id="big-1"] a.id');
    await expect.poll(() => page.locator('#edit-payload').isVisible(), { timeout: 20_000 }).toBe(true);
    const prefilled = await page.locator('#edit-payload').inputValue();
    expect(prefilled).toBe(bodyOf('big-1'));
    expect(await page.locator('#detail pre.payload').textContent()).toContain(`"accountId": ${ACCOUNT}`);

    const edited = prefilled.replace('"amountCents":-100', '"amountCents":100');
    await page.fill('#edit-payload', edited);
    await page.fill('#edit-reason', 'the amount was entered negative');
    const processed = world.recorder.count('processed');
    await page.click('#edit-retry');
    await expect
      .poll(() => page.locator('#detail .act-result').textContent(), { timeout: 30_000 })
      .toMatch(/^replayed with the corrected payload/);
    await world.recorder.waitForCount(processed + 1, { status: 'processed', timeoutMs: 30_000 });
    const [row] = await world.database.store.findRows('orders', ['big-1']);
    expect(row?.status).toBe('completed');
    // The fingerprint of exactly the text the operator edited: …789, not …800.
    expect(row?.fingerprint).toBe(fingerprintJson(edited, JSON.parse(edited)));
    await page.click('#detail-close');
  });

  it('refuses a payload whose numbers changed where the operator could not have changed them, and changes nothing', async () => {
    await dlqHolds(2);
    const [before] = await world.database.store.findRows('orders', ['big-2']);
    // What a re-serialisation sends: the amount corrected, the account id rounded to …800 on the way.
    const reserialised = JSON.stringify({ ...(JSON.parse(bodyOf('big-2')) as object), amountCents: 100 });
    expect(reserialised).toContain('1234567890123456800');
    const response = await fetch(`${server.url}api/edit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-inboxkit-console': '1' },
      body: JSON.stringify({
        dlq,
        consumer: 'orders',
        id: 'big-2',
        payload: reserialised,
        reason: 'fix amount',
      }),
    });
    expect(response.status).toBe(422);
    expect(((await response.json()) as { error: string }).error).toMatch(
      /accountId: 1234567890123456789 became 1234567890123456800/,
    );
    await dlqHolds(2);
    expect(await world.database.store.findRows('orders', ['big-2'])).toEqual([before]);
    expect((await world.database.effects()).get('big-2')).toBeUndefined();
  });

  it('shows ids, reasons and errors with bidi or invisible characters as the CLI prints them', async () => {
    const row = page.locator(`#dlq-table tbody tr[data-id="${SPOOFED}"]`);
    expect(await row.locator('a.id').textContent()).toBe(displayName(SPOOFED));
    expect(displayName(SPOOFED)).toBe('"invoice-\\u{202e}gpj.exe"');
    expect(await row.locator('td.error').textContent()).toBe(
      displayText(`PermanentError: order ${SPOOFED} refused: card declined`),
    );
    await row.locator('a.id').click();
    await expect
      .poll(() => page.locator('#detail-title').textContent(), { timeout: 20_000 })
      .toBe(displayName(SPOOFED));
    const detail = (await page.locator('#detail').textContent()) ?? '';
    expect(detail).not.toContain('\u202e');
    expect(detail).toContain('invoice-\\u{202e}gpj.exe');
    await page.click('#detail-close');
  });
});
