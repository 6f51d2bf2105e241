// The console's Discard and Archive (real Postgres, RabbitMQ and consumer) through its HTTP API, as the page
// calls it: behind the same guards as every act (the console header, no cross-site request, a typed reason),
// audited with the console's operator, a discard removing the DLQ copy, and the audit view listing the acts.
// A discarded id published again is acked as a duplicate and applies nothing. And the page: Discard asks again
// before it acts, and the audit table shows the act.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ConsoleServer } from '../../src/console/console-server.js';
import { launchBrowser } from '../support/browser.js';
import { consoleWorld } from '../support/console-fixture.js';
import type { ConsoleWorld } from '../support/console-fixture.js';
import { eventually } from '../support/eventually.js';

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-inboxkit-console': '1', ...headers },
    body: JSON.stringify(body),
  });

describe('the console: discard and archive dead letters (real Postgres, RabbitMQ and consumer)', () => {
  let world: ConsoleWorld;
  let server: ConsoleServer;
  let dlq: string;
  const status = async (id: string) => (await world.database.store.findRows('orders', [id]))[0]?.status;

  beforeAll(async () => {
    world = await consoleWorld();
    for (const id of ['rt-1', 'rt-2', 'rt-3']) world.refused.add(id);
    await world.publish(['rt-1', 'rt-2', 'rt-3'].map((id, i) => ({ id, amountCents: 100 + i })), 3);
    server = await world.console();
    dlq = `rabbitmq:${world.broker.dlq}`;
  }, 120_000);

  afterAll(async () => {
    await world?.dispose();
  });

  it('refuses a discard without the console header, from another site, or without a reason, and changes nothing', async () => {
    const body = { consumer: 'orders', ids: ['rt-1'], reason: 'test order', dlq };
    const noHeader = await fetch(`${server.url}api/discard`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(noHeader.status).toBe(403);
    expect((await post(`${server.url}api/discard`, body, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    const noReason = await post(`${server.url}api/discard`, { ...body, reason: ' ' });
    expect(noReason.status).toBe(400);
    expect(((await noReason.json()) as { error: string }).error).toBe('reason is required');
    const noIds = await post(`${server.url}api/archive`, { consumer: 'orders', reason: 'x' });
    expect(noIds.status).toBe(400);
    expect(await status('rt-1')).toBe('dead_lettered');
    expect(await world.broker.dlqDepth()).toBe(3);
  });

  it('discards one dead letter, audited with the operator, and removes its DLQ copy; published again it is a duplicate', { timeout: 120_000 }, async () => {
    const response = await post(`${server.url}api/discard`, { consumer: 'orders', ids: ['rt-1'], reason: 'test order from staging', dlq });
    expect(response.status).toBe(200);
    const result = (await response.json()) as { actionId: string; changed: { messageId: string; priorStatus: string }[]; dlq: { removed: string[] } };
    expect(result.changed).toMatchObject([{ messageId: 'rt-1', priorStatus: 'dead_lettered' }]);
    expect(result.dlq.removed).toEqual(['rt-1']);
    expect(await status('rt-1')).toBe('discarded');
    await eventually(
      async () => (await world.broker.dlqDepth()) === 2,
      async () => `DLQ depth ${await world.broker.dlqDepth()}`,
    );
    expect((await world.broker.deadLetters()).map((e) => e.id).sort()).toEqual(['rt-2', 'rt-3']);

    // Published straight to the source (world.publish would also wait on the DLQ's depth, which a copy held
    // for a moment by the listing above can make read short under load): awaited by its outcome.
    await world.broker.publish([{ id: 'rt-1', body: JSON.stringify({ orderId: 'rt-1', amountCents: 100 }) }]);
    const again = await world.recorder.waitFor('rt-1', (o) => o.status === 'duplicate', { timeoutMs: 90_000 });
    expect(again.outcome).toMatchObject({ status: 'duplicate', reason: 'discarded' });
    expect((await world.database.effects()).get('rt-1')).toBeUndefined();
    await eventually(
      async () => (await world.broker.dlqDepth()) === 2,
      async () => `DLQ depth ${await world.broker.dlqDepth()}`,
      60_000,
    );
  });

  it('archives one, refuses to archive it twice, and the audit view lists the acts with who and why', async () => {
    const archived = await post(`${server.url}api/archive`, { consumer: 'orders', ids: ['rt-2'], reason: 'refunded by hand' });
    expect(archived.status).toBe(200);
    expect(await status('rt-2')).toBe('archived');
    const twice = await post(`${server.url}api/archive`, { consumer: 'orders', ids: ['rt-2'], reason: 'again' });
    expect(twice.status).toBe(409);
    // Its DLQ copy stays (the inbox keeps no payload).
    expect(await world.broker.dlqDepth()).toBe(2);

    const audit = (await (await fetch(`${server.url}api/audit`)).json()) as { lines: { action: string; messageId: string; requestedBy: string; outcome: string }[] };
    expect(audit.lines.filter((l) => l.action === 'discarded' || l.action === 'archived')).toEqual([
      expect.objectContaining({ action: 'archived', messageId: 'rt-2', requestedBy: 'console-test', outcome: 'archived dead_lettered/permanent-error: refunded by hand' }),
      expect.objectContaining({ action: 'discarded', messageId: 'rt-1', requestedBy: 'console-test', outcome: 'discarded dead_lettered/permanent-error: test order from staging' }),
    ]);
    const onlyDiscards = (await (await fetch(`${server.url}api/audit?action=discarded`)).json()) as { lines: { messageId: string }[] };
    expect(onlyDiscards.lines.map((l) => l.messageId)).toEqual(['rt-1']);
    expect((await fetch(`${server.url}api/audit?action=exploded`)).status).toBe(400);
    expect(world.log.some((line) => /^archive \S+ by console-test of 1 dead letter/.test(line))).toBe(true);
  });

  it('in the page: Discard needs a reason and a second click, then the audit table shows it', { timeout: 120_000 }, async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.context.newPage();
      await page.goto(server.url);
      await page.fill('#lookup-consumer', 'orders');
      await page.fill('#lookup-id', 'rt-3');
      await page.click('#lookup-open');
      await expect.poll(() => page.locator('#discard').isVisible(), { timeout: 20_000 }).toBe(true);
      await page.click('#discard');
      expect(await page.locator('#discard').textContent()).toBe('Really discard? Click again');
      expect(await status('rt-3')).toBe('dead_lettered');
      await page.click('#discard');
      await expect.poll(() => page.locator('#detail .retire-result').textContent(), { timeout: 20_000 }).toBe('reason is required');
      await page.fill('#retire-reason', 'customer cancelled');
      await page.click('#discard');
      await page.click('#discard');
      await expect
        .poll(() => page.locator('#detail .retire-result').textContent(), { timeout: 20_000 })
        .toMatch(/^discarded \(audited under [0-9a-f]{8}\): it will never run/);
      expect(await status('rt-3')).toBe('discarded');
      await page.click('#detail-close');
      await page.selectOption('#audit-action', 'discarded');
      await expect
        .poll(() => page.locator('#audit-table tbody tr').allTextContents(), { timeout: 20_000 })
        .toEqual([expect.stringContaining('rt-3'), expect.stringContaining('rt-1')]);
    } finally {
      await browser.close();
    }
  });
});
