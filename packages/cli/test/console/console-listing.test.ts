// The console's listing over a long DLQ with a large dead letter (real Postgres, RabbitMQ and consumer): the
// DLQ is read as a stream and one page kept, pages say that more exist, a search reaches past 10,000 reads,
// and a listing keeps at most BODY_PREVIEW_BYTES of a body while `POST /api/message-body` returns it whole.

import { HEADERS } from '@inboxkit/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { launchBrowser } from '../support/browser.js';

import { BODY_PREVIEW_BYTES } from '../../src/console/console-api.js';
import type { ConsoleServer } from '../../src/console/console-server.js';
import { consoleWorld } from '../support/console-fixture.js';
import type { ConsoleWorld } from '../support/console-fixture.js';
import { eventually } from '../support/eventually.js';

/** Dead letters past the old listing cap of 10,000 reads. */
const DEEP = 10_049;
const deepId = (n: number) => `deep-${String(n).padStart(5, '0')}`;
const HUGE_BODY = JSON.stringify({ orderId: 'huge-1', amountCents: 1, note: 'x'.repeat(3_000_000) });

interface Listed {
  listing: string;
  more: boolean;
  offset: number;
  read: number;
  entries: { id: string; position: string; bodyBytes: number }[];
}

describe('console listings of a long DLQ (real Postgres and RabbitMQ)', () => {
  let world: ConsoleWorld;
  let server: ConsoleServer;
  let dlq: string;
  const post = (path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-inboxkit-console': '1' },
      body: JSON.stringify(body),
    });
  const list = async (body: Record<string, unknown>): Promise<Listed> => {
    const response = await post('api/dead-letters', { dlq, ...body });
    expect(response.status, await response.clone().text()).toBe(200);
    return (await response.json()) as Listed;
  };

  beforeAll(async () => {
    world = await consoleWorld();
    world.refused.add('huge-1');
    await world.broker.publish([{ id: 'huge-1', body: HUGE_BODY }]);
    await eventually(
      async () => (await world.broker.dlqDepth()) === 1,
      async () => `DLQ depth ${await world.broker.dlqDepth()}`,
      60_000,
    );
    // Copies of the real dead letter's record under other ids, with small bodies, straight into the DLQ.
    const [template] = await world.broker.deadLetters();
    const copies = Array.from({ length: DEEP }, (_, i) => {
      const id = deepId(i + 1);
      return {
        id,
        position: '',
        body: JSON.stringify({ orderId: id, amountCents: 1 }),
        headers: { ...template!.headers, [HEADERS.originalId]: id, [HEADERS.messageId]: id },
      };
    });
    for (let i = 0; i < copies.length; i += 1_000) await world.broker.restore(copies.slice(i, i + 1_000));
    await eventually(
      async () => (await world.broker.dlqDepth()) === DEEP + 1,
      async () => `DLQ depth ${await world.broker.dlqDepth()}, expected ${DEEP + 1}`,
      120_000,
    );
    server = await world.console();
    dlq = `rabbitmq:${world.broker.dlq}`;
  }, 600_000);

  afterAll(async () => {
    await world?.dispose();
  });

  it(
    'the page shows one page, says more exist and pages on; a cut body loads whole on request',
    { timeout: 600_000 },
    async () => {
      const browser = await launchBrowser();
      try {
        const page = await browser.context.newPage();
        await page.goto(server.url);
        const rows = page.locator('#dlq-table tbody tr');
        await expect.poll(() => rows.count(), { timeout: 60_000 }).toBe(100);
        expect(await page.locator('#dlq-note').textContent()).toMatch(
          /Showing 1–100: more dead letters match/,
        );
        expect(await page.locator('#page-prev').isDisabled()).toBe(true);
        // The DLQ's first message, cut: the editor waits for the whole body.
        await page.click('#dlq-table tbody tr[data-id="huge-1"] a.id');
        await expect.poll(() => page.locator('#load-body').isVisible(), { timeout: 20_000 }).toBe(true);
        expect(await page.locator('#body-cut').textContent()).toMatch(
          new RegExp(`of ${Buffer.byteLength(HUGE_BODY).toLocaleString('en-US')} are shown`),
        );
        const payload = page.locator('#detail pre.payload');
        expect(((await payload.textContent()) ?? '').length).toBeLessThan(20_000);
        await page.click('#load-body');
        await expect
          .poll(() => page.locator('#body-cut').textContent(), { timeout: 60_000 })
          .toMatch(/^The whole body, /);
        // Shown indented: every character of the body is there.
        expect(((await payload.textContent()) ?? '').replace(/\s/g, '')).toBe(HUGE_BODY.replace(/\s/g, ''));
        await page.click('#detail-close');
        await page.click('#page-next');
        await expect
          .poll(() => page.locator('#page-range').textContent(), { timeout: 60_000 })
          .toBe('101–200 of more');
        expect(await rows.count()).toBe(100);
        expect(await page.locator('#page-prev').isDisabled()).toBe(false);
      } finally {
        await browser.close();
      }
    },
  );

  it(
    'keeps at most BODY_PREVIEW_BYTES of a body, says its size, and returns it whole on request',
    { timeout: 300_000 },
    async () => {
      // Near the DLQ's front (its first message), but the listings before receive and release thousands of
      // messages, which can move it back (CI: not in the first 200): page on until it is found.
      let listed = await list({ pageSize: 200 });
      expect(listed.more).toBe(true);
      let entry = listed.entries.find((e) => e.id === 'huge-1');
      while (entry === undefined && listed.more) {
        listed = await list({ pageSize: 200, offset: listed.offset + listed.entries.length });
        entry = listed.entries.find((e) => e.id === 'huge-1');
      }
      expect(entry?.id).toBe('huge-1');
      expect(entry?.bodyBytes).toBe(Buffer.byteLength(HUGE_BODY));
      const record = (await (
        await fetch(
          `${server.url}api/message?${new URLSearchParams({ dlq, position: entry!.position, listing: listed.listing })}`,
        )
      ).json()) as {
        deadLetter: { body: string; bodyBytes: number; bodyTruncated: boolean };
        prediction: string;
      };
      const predicted = (entry as unknown as { prediction: string }).prediction;
      expect(record.deadLetter.bodyTruncated).toBe(true);
      expect(record.deadLetter.bodyBytes).toBe(Buffer.byteLength(HUGE_BODY));
      expect(Buffer.byteLength(record.deadLetter.body)).toBe(BODY_PREVIEW_BYTES);
      expect(HUGE_BODY.startsWith(record.deadLetter.body)).toBe(true);
      // The prediction is the whole body's, not the cut one's (a cut body would read as payload-mismatch).
      expect(record.prediction).toBe(predicted);
      expect(predicted).not.toBe('payload-mismatch');

      const whole = await post('api/message-body', {
        dlq,
        position: entry!.position,
        listing: listed.listing,
      });
      expect(whole.status).toBe(200);
      expect(whole.headers.get('content-type')).toBe('application/octet-stream');
      expect(await whole.text()).toBe(HUGE_BODY);
      // Reading a body whole receives and releases on RabbitMQ: a GET is refused like the listing's.
      expect((await fetch(`${server.url}api/message-body`)).status).toBe(404);
      expect(await world.broker.dlqDepth()).toBe(DEEP + 1);
    },
  );
  it('pages the listing: each page holds pageSize dead letters and says whether more exist', async () => {
    const first = await list({ pageSize: 50 });
    expect(first.entries).toHaveLength(50);
    expect(first.more).toBe(true);
    // Read as far as the page and one more: not the whole DLQ.
    expect(first.read).toBeLessThanOrEqual(51);
    const second = await list({ pageSize: 50, offset: 50 });
    expect(second.entries).toHaveLength(50);
    expect(second.more).toBe(true);
    expect(second.offset).toBe(50);
    // RabbitMQ has no peek: the first listing's messages went back to the DLQ, and a few may have changed
    // places, so a page can repeat or miss one that moved (the docs say so). The second page is still the
    // next one: almost all of it is new (without paging it would be the first page again, 50 in all).
    const both = new Set([...first.entries, ...second.entries].map((e) => e.id));
    expect(both.size).toBeGreaterThanOrEqual(95);
    // A page that ends where the reading stops (limit) has nothing after it that was seen.
    const bounded = await list({ pageSize: 50, offset: 50, limit: 60 });
    expect(bounded.entries).toHaveLength(10);
    expect(bounded.more).toBe(false);
    expect(bounded.read).toBe(60);
  });

  it(
    'searches past 10,000 reads: the last of 10,050 dead letters is found',
    { timeout: 600_000 },
    async () => {
      const found = await list({ search: deepId(DEEP) });
      expect(found.entries.map((e) => e.id)).toEqual([deepId(DEEP)]);
      expect(found.read).toBe(DEEP + 1);
      expect(found.more).toBe(false);
    },
  );
});
