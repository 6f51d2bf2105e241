// The demo's story, run as a test: embedded (PGlite + learning transport) and on the real brokers. It asserts
// the facts the demo prints, so the demo cannot drift into printing something that is no longer true.

import { describe, expect, it } from 'vitest';

import { requireService } from '../../../test/support/services.js';
import type { DemoResult } from '../src/demo-result.js';
import type { TransportName } from '../src/demo-transport.js';
import { runDemo } from '../src/run-demo.js';
import type { ServiceSettings } from '../src/service-settings.js';
import { STORY } from '../src/story.js';

function servicesFor(transport: TransportName): ServiceSettings {
  const postgres = requireService('postgres');
  switch (transport) {
    case 'learning':
      return {};
    case 'kafka':
      return { databaseUrl: postgres.url, kafkaBrokers: requireService('kafka').brokers };
    case 'rabbitmq':
      return { databaseUrl: postgres.url, amqpUrl: requireService('rabbitmq').url };
    case 'sqs': {
      const sqs = requireService('sqs');
      return {
        databaseUrl: postgres.url,
        sqs: { endpoint: sqs.endpoint, region: sqs.region, credentials: sqs.credentials },
      };
    }
    case 'nats':
      return { databaseUrl: postgres.url, natsUrl: requireService('nats').url };
  }
}

/** What must hold on every transport: the guarantee, the DLQ, and both replays. */
function expectTheStory(result: DemoResult): void {
  // Exactly once, from the payments table and the provider: one row and one charge per payment, none for the
  // declined card, one idempotency key per payment however often it was called.
  expect(result.ok).toBe(true);
  for (const payment of STORY) {
    const check = result.payments.find((c) => c.paymentId === payment.paymentId);
    const expected = payment.chargedInTheEnd ? 1 : 0;
    expect(check, payment.paymentId).toMatchObject({ rows: expected, charges: expected, keys: 1, ok: true });
  }
  expect(result.payments.find((c) => c.paymentId === 'pay-006')?.providerCalls).toBe(2); // crash before COMMIT
  expect(result.payments.find((c) => c.paymentId === 'pay-004')?.providerCalls).toBe(2); // 503, then the retry

  expect(result.arrived).toMatchObject({ published: 13, payments: 10, distinctIds: 10 });
  expect(result.arrived.crashes).toEqual({ 'after-handler-before-commit': 1, 'after-commit-before-ack': 1 });
  // Eight payments are charged in the first phase: each processed exactly once, never twice.
  expect(result.outcomes.processed).toBe(8);
  expect(result.duplicatesSuppressed).toBe(result.outcomes.duplicate);

  // The DLQ: both copies of the old app's payment (schema) and the declined card (PermanentError).
  expect(result.deadLetters.map((d) => [d.id, d.reason, d.attempts])).toEqual([
    ['pay-008', 'schema-invalid', 0],
    ['pay-008', 'schema-invalid', 0],
    ['pay-009', 'permanent-error', 1],
  ]);
  expect(result.deadLetters[0]?.error).toContain('amountCents');
  expect(result.deadLetters[2]?.error).toBe('card declined: insufficient funds');

  // Replay 1 after the fix: one copy reopened and charged once (attempt 1), the other skipped as completed.
  const [first, second] = result.replays;
  expect(first).toMatchObject({ replayId: 'replay-1', replayed: 2, failed: 0, notSelected: 1 });
  expect(
    first!.outcomes.map((o) => [o.id, o.status, o.status === 'processed' ? o.attempt : o.reason]).sort(),
  ).toEqual([
    ['pay-008', 'duplicate', 'replay-of-completed'],
    ['pay-008', 'processed', 1],
  ]);
  // Replay 2, the same batch again: nothing is applied twice.
  expect(second).toMatchObject({ replayId: 'replay-2', replayed: 2, failed: 0 });
  expect(second!.outcomes.map((o) => [o.id, o.status, o.reason])).toEqual([
    ['pay-008', 'duplicate', 'replay-of-completed'],
    ['pay-008', 'duplicate', 'replay-of-completed'],
  ]);

  expect(result.deadLettersLeft).toBe(1);
  expect(result.inbox).toEqual({ completed: 9, dead_lettered: 1 });
}

describe('npm run demo', () => {
  it('tells the whole story on PGlite and the learning transport, with no server', async () => {
    const lines: string[] = [];
    const result = await runDemo({ transport: 'learning', out: (line) => lines.push(line) });
    expectTheStory(result);
    // The learning transport is deterministic: every count is exact.
    expect(result.arrived).toMatchObject({ deliveries: 16, duplicateCopies: 3, redeliveries: 3 });
    expect(result.outcomes).toEqual({ processed: 8, duplicate: 3, retry: 1, 'dead-letter': 3 });
    expect(result.retries).toEqual({ 'pay-004: payment provider answered 503 Service Unavailable': 1 });
    // The report fits a 100-column terminal and is plain text when not on a TTY.
    expect(lines.filter((line) => line.length > 100)).toEqual([]);
    expect(lines.join('\n')).not.toContain('\u001b[');
    expect(lines.join('\n')).toContain(
      '✓ exactly once: 9 payments charged once, 1 declined and never charged, 0 charged twice',
    );
  }, 180_000); // PGlite's first initdb on a busy 2-core CI runner can take half a minute

  for (const transport of ['kafka', 'rabbitmq', 'sqs', 'nats'] as const) {
    it(`tells the same story on real Postgres and ${transport}`, async () => {
      const result = await runDemo({ transport, services: servicesFor(transport) });
      expectTheStory(result);
      // A real broker may redeliver more than the story asks (a rebalance, a slow ack): never fewer.
      expect(result.arrived.deliveries).toBeGreaterThanOrEqual(16);
      expect(result.arrived.duplicateCopies).toBe(3);
      expect(result.arrived.redeliveries).toBeGreaterThanOrEqual(3);
      expect(result.outcomes.duplicate).toBeGreaterThanOrEqual(3);
    }, 180_000);
  }
});
