// The operator console in a real browser (Debian's Chromium through playwright-core) over real Postgres and
// RabbitMQ with a real consumer: the page loads with its charts, filters the dead letters, shows one message's
// full record, dry-runs a selection (nothing changes), replays it at a rate with live progress, and two
// operators replaying the same selection at once apply each message once; a replay whose live stream is lost
// (or opened after it ended) is still shown done. Set
// INBOXKIT_CONSOLE_SCREENSHOTS=docs/console to refresh the screenshots of docs/console.md.

import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ConsoleServer } from '../../src/console/console-server.js';
import { launchBrowser } from '../support/browser.js';
import type { TestBrowser } from '../support/browser.js';
import { consoleWorld } from '../support/console-fixture.js';
import { eventually } from '../support/eventually.js';
import type { ConsoleWorld } from '../support/console-fixture.js';
import { REPO_ROOT } from '../support/services.js';

const shots = process.env.INBOXKIT_CONSOLE_SCREENSHOTS;
async function screenshot(page: Page, name: string): Promise<void> {
  if (shots === undefined || shots === '') return;
  const dir = resolve(REPO_ROOT, shots);
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`), fullPage: false });
}

const refused = ['ord-1001', 'ord-1002', 'ord-1003', 'ord-1004', 'ord-1005', 'ord-1006'];
const flaky = ['ord-2001', 'ord-2002', 'ord-2003', 'ord-2004'];
const invalid = ['ord-3001', 'ord-3002'];
const fine = Array.from({ length: 30 }, (_, i) => `ord-${4001 + i}`);

describe('the operator console in Chromium (real Postgres, RabbitMQ and consumer)', () => {
  let world: ConsoleWorld;
  let server: ConsoleServer;
  let browser: TestBrowser;
  let page: Page;

  beforeAll(async () => {
    world = await consoleWorld();
    refused.forEach((id) => world.refused.add(id));
    flaky.forEach((id) => world.flaky.add(id));
    // Some history first, so the state tiles have a shape: orders that go through, then the failures.
    await world.publish(
      fine.slice(0, 15).map((id, i) => ({ id, amountCents: 1000 + i })),
      0,
    );
    await world.recorder.waitForCount(15, { status: 'processed', timeoutMs: 30_000 });
    server = await world.console();
    await world.publish(
      [
        ...refused.map((id, i) => ({ id, amountCents: 2500 + i })),
        ...flaky.map((id, i) => ({ id, amountCents: 990 + i })),
        ...invalid.map((id) => ({ id, amountCents: -100 })),
        ...fine.slice(15).map((id, i) => ({ id, amountCents: 700 + i })),
      ],
      refused.length + flaky.length + invalid.length,
    );
    browser = await launchBrowser();
    page = await browser.context.newPage();
  }, 600_000);

  afterAll(async () => {
    await browser?.close();
    await world?.dispose();
  });

  const rows = (p: Page) => p.locator('#dlq-table tbody tr');
  // How many dead letters the DLQ holds, once any listing of the page has let go of them: a listing browses
  // the DLQ, holding its messages unacknowledged for a moment, and a count taken then reads them as gone.
  /**
   * Clicks List and waits for that listing's answer: a poll of the table alone can be met by the listing before
   * (CI: a one-row table from the previous test was selected and replayed while the new listing still held the
   * DLQ's message, so the replay found nothing, 'stopped because drained').
   */
  const list = async (): Promise<void> => {
    const answered = page.waitForResponse(
      (response) => response.url().endsWith('/api/dead-letters') && response.request().method() === 'POST',
    );
    await page.click('#list');
    await answered;
  };

  const dlqHolds = (n: number) =>
    eventually(
      async () => (await world.broker.dlqDepth()) === n,
      async () => `DLQ depth ${await world.broker.dlqDepth()}, expected ${n}`,
    );

  it('loads the page: per consumer its state counts with their sparklines, the per-hour chart and the dead letters', async () => {
    await page.goto(server.url);
    const card = page.locator('article.card[data-consumer="orders"]');
    await expect.poll(() => card.count(), { timeout: 20_000 }).toBe(1);
    await expect.poll(() => card.locator('.tile.completed .tile-value').textContent()).toBe('30');
    expect(await card.locator('.tile.dead_lettered .tile-value').textContent()).toBe('12');
    expect(await card.locator('svg.spark').count()).toBe(4);
    // The hour of the dead letters has its red bar.
    const bars = await card
      .locator('svg.hourly rect.bar.dead')
      .evaluateAll((els) => els.map((e) => Number(e.getAttribute('height'))));
    expect(bars.filter((hgt) => hgt > 0).length).toBeGreaterThanOrEqual(1);
    await expect.poll(() => rows(page).count(), { timeout: 20_000 }).toBe(12);
    const groups = await page.locator('#groups .group').allTextContents();
    expect(groups.join(' | ')).toMatch(/6 permanent-error/);
    expect(groups.join(' | ')).toMatch(/4 max-attempts/);
    expect(groups.join(' | ')).toMatch(/2 schema-invalid/);
    await screenshot(page, 'console-overview');
  });

  it('filters the dead letters by reason, by id or error text, and by time', async () => {
    await page.selectOption('#f-reason', 'max-attempts');
    await list();
    await expect.poll(() => rows(page).count()).toBe(4);
    expect((await page.locator('#dlq-table tbody tr td:nth-child(2)').allTextContents()).sort()).toEqual(
      flaky,
    );

    await page.selectOption('#f-reason', '');
    await page.fill('#f-search', 'card declined');
    await list();
    await expect.poll(() => rows(page).count()).toBe(6);

    await page.fill('#f-search', 'ord-3002');
    await list();
    await expect.poll(() => rows(page).count()).toBe(1);

    await page.fill('#f-search', '');
    await page.fill('#f-until', '2000-01-01T00:00');
    await list();
    await expect.poll(() => page.locator('#dlq-empty').isVisible()).toBe(true);
    expect(await rows(page).count()).toBe(0);
    await page.fill('#f-until', '');
    await page.selectOption('#f-consumer', 'orders');
    await page.selectOption('#f-reason', 'permanent-error');
    await list();
    await expect.poll(() => rows(page).count()).toBe(6);
  });

  it("shows one message's full record: payload, headers, error, inbox row, replay history", async () => {
    await page.click('#dlq-table tbody tr[data-id="ord-1003"] a.id');
    const detail = page.locator('#detail');
    await expect.poll(() => detail.isVisible()).toBe(true);
    await expect.poll(() => page.locator('#detail-title').textContent()).toBe('ord-1003');
    const text = (await detail.textContent()) ?? '';
    expect(text).toContain('"orderId": "ord-1003"');
    expect(text).toContain('"amountCents": 2502');
    expect(text).toContain('PermanentError: order ord-1003 refused: card declined');
    expect(text).toContain('x-inboxkit-reason');
    expect(text).toContain('dead_lettered');
    expect(text).toContain('never replayed');
    expect(await detail.locator('.prediction .pill').textContent()).toBe('reopen');
    await screenshot(page, 'console-message');
    await page.click('#detail-close');
  });

  it('dry-runs the selection: says per message what would happen and changes nothing', async () => {
    const before = {
      rows: await world.database.rows('orders'),
      effects: await world.database.effects(),
    };
    await dlqHolds(12);
    await page.click('#select-all');
    expect(await page.locator('#selected-count').textContent()).toBe('6 selected');
    await page.click('#dry-run');
    await expect.poll(() => page.locator('#dry-result tbody tr').count(), { timeout: 20_000 }).toBe(6);
    const predictions = await page.locator('#dry-result tbody tr td:nth-child(4)').allTextContents();
    expect(predictions).toEqual(Array(6).fill('reopen'));
    expect(await world.database.rows('orders')).toEqual(before.rows);
    expect(await world.database.effects()).toEqual(before.effects);
    await dlqHolds(12);
    await page.evaluate("document.querySelector('#dry-result')?.scrollIntoView()");
    await screenshot(page, 'console-dry-run');
  });

  it('replays the selection at a rate with live progress; each message is applied once', async () => {
    refused.forEach((id) => world.refused.delete(id));
    const processed = world.recorder.events.filter((e) => e.outcome.status === 'processed').length;
    await page.fill('#rate', '4');
    await page.click('#replay');
    // Live progress: the counter moves before the run is done (4/s: six take about 1.5 s).
    await expect
      .poll(() => page.locator('#job .counts').textContent(), { timeout: 20_000 })
      .toMatch(/^[1-5] \/ 6/);
    await page.evaluate("document.querySelector('#dead-letters')?.scrollIntoView()");
    await screenshot(page, 'console-replay-progress');
    await expect
      .poll(() => page.locator('#job').getAttribute('data-state'), { timeout: 30_000 })
      .toBe('done');
    expect(await page.locator('#job .counts').textContent()).toMatch(/replayed 6, failed 0/);
    await world.recorder.waitForCount(processed + 6, { status: 'processed', timeoutMs: 30_000 });
    const effects = await world.database.effects();
    for (const id of refused) expect(effects.get(id)).toBe(1);
    await dlqHolds(6);
    // The replay audit shows in the message's history.
    await page.selectOption('#f-reason', '');
    await list();
    await expect.poll(() => rows(page).count()).toBe(6);
  });

  it('two operators replaying the same selection at once apply each message once', async () => {
    flaky.forEach((id) => world.flaky.delete(id));
    const second = await browser.context.newPage();
    await second.goto(server.url);
    await expect.poll(() => rows(second).count(), { timeout: 20_000 }).toBe(6);
    for (const p of [page, second]) {
      await p.selectOption('#f-reason', 'max-attempts');
      await p.click('#list');
      await expect.poll(() => rows(p).count(), { timeout: 20_000 }).toBe(4);
      await p.fill('#rate', '50');
      await p.click('#select-all');
    }
    // The second page's live stream opens only once its replay has ended on the server (as when the first
    // operator's run takes every message before the page connects): the page still shows it done.
    const jobState = async (url: string) => ((await (await fetch(url)).json()) as { state: string }).state;
    await second.route('**/api/replays/*/events', async (route) => {
      const job = route
        .request()
        .url()
        .replace(/\/events$/, '');
      await eventually(
        async () => (await jobState(job)) !== 'running',
        async () => `replay ${job} is ${await jobState(job)}`,
      );
      await route.continue();
    });
    const processed = world.recorder.events.filter((e) => e.outcome.status === 'processed').length;
    await Promise.all([page.click('#replay'), second.click('#replay')]);
    for (const p of [page, second])
      await expect.poll(() => p.locator('#job').getAttribute('data-state'), { timeout: 30_000 }).toBe('done');
    await world.recorder.waitForCount(processed + 4, { status: 'processed', timeoutMs: 30_000 });
    const effects = await world.database.effects();
    for (const id of [...fine, ...refused, ...flaky]) expect(effects.get(id), id).toBe(1);
    for (const id of invalid) expect(effects.get(id)).toBeUndefined();
    await dlqHolds(2);
    await second.close();
  });

  it('parks a message whose replay fails again: the next bulk replay from the page leaves it in the DLQ', async () => {
    // The two schema-invalid orders fail the schema again when replayed: back in the DLQ, parked.
    await page.selectOption('#f-reason', 'schema-invalid');
    await list();
    await expect.poll(() => rows(page).count(), { timeout: 20_000 }).toBe(2);
    expect(await page.locator('#dlq-table .pill.parked').count()).toBe(0);
    await page.click('#select-all');
    const deadLettered = world.recorder.count('dead-letter');
    await page.click('#replay');
    await expect
      .poll(() => page.locator('#job').getAttribute('data-state'), { timeout: 30_000 })
      .toBe('done');
    expect(await page.locator('#job .counts').textContent()).toMatch(/replayed 2, failed 0/);
    await world.recorder.waitForCount(deadLettered + 2, { status: 'dead-letter', timeoutMs: 30_000 });
    await dlqHolds(2);

    await list();
    await expect.poll(() => page.locator('#dlq-table .pill.parked').count(), { timeout: 20_000 }).toBe(2);
    await page.click('#select-all');
    await page.click('#dry-run');
    await expect
      .poll(() => page.locator('#dry-result h3').textContent(), { timeout: 20_000 })
      .toMatch(/0 would be replayed, 2 parked/);
    await page.click('#replay');
    await expect
      .poll(() => page.locator('#job').getAttribute('data-state'), { timeout: 30_000 })
      .toBe('done');
    expect(await page.locator('#job .counts').textContent()).toMatch(
      /replayed 0, failed 0, unreplayable 0, parked 2/,
    );
    await dlqHolds(2);
    expect(world.recorder.count('dead-letter')).toBe(deadLettered + 2);
    const effects = await world.database.effects();
    for (const id of invalid) expect(effects.get(id)).toBeUndefined();
    await list();
    await expect.poll(() => page.locator('#dlq-table .pill.parked').count(), { timeout: 20_000 }).toBe(2);
    await screenshot(page, 'console-parked');
  });

  it("edits and retries a parked message from the page: a payload failing the schema is refused with the schema's message, the corrected one is applied once and audited", async () => {
    await page.selectOption('#f-reason', 'schema-invalid');
    await list();
    await expect.poll(() => rows(page).count(), { timeout: 20_000 }).toBe(2);
    await page.click('#dlq-table tbody tr[data-id="ord-3001"] a.id');
    await expect.poll(() => page.locator('#edit-payload').isVisible(), { timeout: 20_000 }).toBe(true);
    expect(await page.locator('#edit-payload').inputValue()).toContain('"amountCents":-100');
    const before = { rows: await world.database.rows('orders') };
    await dlqHolds(2);

    // Still negative: the schema refuses it, nothing changes.
    await page.fill('#edit-payload', JSON.stringify({ orderId: 'ord-3001', amountCents: -1 }, null, 2));
    await page.fill('#edit-reason', 'sign flipped');
    await page.click('#edit-retry');
    await expect
      .poll(() => page.locator('#detail .act-result').textContent(), { timeout: 20_000 })
      .toMatch(/the edited payload is refused: the payload does not match the schema: amountCents: /);
    expect(await page.locator('#detail .act-result.error').count()).toBe(1);
    expect(await world.database.rows('orders')).toEqual(before.rows);
    await dlqHolds(2);

    // Corrected: amended (audited), replayed once.
    const processed = world.recorder.count('processed');
    await page.fill('#edit-payload', JSON.stringify({ orderId: 'ord-3001', amountCents: 100 }, null, 2));
    await page.fill('#edit-reason', 'the amount was entered negative');
    await screenshot(page, 'console-edit');
    await page.click('#edit-retry');
    await expect
      .poll(() => page.locator('#detail .act-result').textContent(), { timeout: 30_000 })
      .toMatch(/^replayed with the corrected payload \(amended /);
    await world.recorder.waitForCount(processed + 1, { status: 'processed', timeoutMs: 30_000 });
    expect((await world.database.effects()).get('ord-3001')).toBe(1);
    expect((await world.database.effects()).get('ord-3002')).toBeUndefined();
    await dlqHolds(1);
    const audit = await world.database.store.listReplays({ consumer: 'orders', messageId: 'ord-3001' });
    expect(
      audit.some((a) =>
        /^amended [0-9a-f]{64} -> [0-9a-f]{64}: the amount was entered negative$/.test(a.outcome),
      ),
    ).toBe(true);
    expect(audit.find((a) => a.outcome.startsWith('amended'))?.requestedBy).toBe('console-test');
    await page.click('#detail-close');
  });

  it('forgets one completed id from the page, audited; its next delivery is applied again', async () => {
    await page.fill('#lookup-consumer', 'orders');
    await page.fill('#lookup-id', 'ord-4001');
    await page.click('#lookup-open');
    await expect.poll(() => page.locator('#forget').isVisible(), { timeout: 20_000 }).toBe(true);
    await page.click('#forget');
    await expect
      .poll(() => page.locator('#detail .act-result').textContent(), { timeout: 20_000 })
      .toMatch(/reason is required/);
    expect(await world.database.store.findRows('orders', ['ord-4001'])).toHaveLength(1);
    await page.fill('#forget-reason', 'reprocess after the tax fix');
    await screenshot(page, 'console-forget');
    await page.click('#forget');
    await expect
      .poll(() => page.locator('#detail .act-result').textContent(), { timeout: 20_000 })
      .toMatch(/^forgotten \(audited under [0-9a-f]{8}\)/);
    expect(await world.database.store.findRows('orders', ['ord-4001'])).toEqual([]);
    const [line] = await world.database.store.listReplays({ consumer: 'orders', messageId: 'ord-4001' });
    expect(line?.outcome).toMatch(/^forgotten [0-9a-f]{64}: reprocess after the tax fix$/);
    const processed = world.recorder.count('processed');
    await world.publish([{ id: 'ord-4001', amountCents: 1000 }], 0);
    await world.recorder.waitForCount(processed + 1, { status: 'processed', timeoutMs: 30_000 });
    expect((await world.database.effects()).get('ord-4001')).toBe(2);
    await page.click('#detail-close');
  });

  it('shows a replay done when its live progress stream is lost: the page asks the server until the job ends', async () => {
    // ord-3002 is left in the DLQ, parked: a replay of it ends at once, leaving it there.
    await page.route('**/api/replays/*/events', (route) => route.abort());
    try {
      await page.selectOption('#f-reason', 'schema-invalid');
      await list();
      await expect.poll(() => rows(page).count(), { timeout: 20_000 }).toBe(1);
      await page.click('#select-all');
      await dlqHolds(1);
      await page.click('#replay');
      await expect
        .poll(() => page.locator('#job').getAttribute('data-state'), { timeout: 30_000 })
        .toBe('done');
      expect(await page.locator('#job .counts').textContent()).toMatch(
        /replayed 0, failed 0, unreplayable 0, parked 1/,
      );
      await dlqHolds(1);
    } finally {
      await page.unroute('**/api/replays/*/events');
    }
  });
});
