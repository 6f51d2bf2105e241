// The payments service against real Kafka and Postgres: each payment is charged once through a double click
// and a lost provider response; without the downstream key the same lost response charges twice; and
// assertIdempotentHandler proves the consumer under every redelivery pattern.

import { randomUUID } from 'node:crypto';

import { downstreamKey } from '@inboxkit/core';
import type { DeadLetterEntry } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { kafkaDeadLetterQueue, kafkaPublisher } from '@inboxkit/kafka';
import { OutcomeRecorder, assertIdempotentHandler, uniqueName } from '@inboxkit/testing';
import { Kafka, logLevel } from 'kafkajs';
import { Kysely, PostgresDialect } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createTestSchema, requireService } from '../../../test/support/services.js';
import type { TestSchema } from '../../../test/support/services.js';
import { DECLINED_CARD, startFakePaymentProvider } from '../src/payment-provider.js';
import type { FakePaymentProvider } from '../src/payment-provider.js';
import { createPaymentsTable, paymentsConsumer } from '../src/payments-consumer.js';
import type { PaymentsDatabase } from '../src/payments-consumer.js';
import { startPaymentsService } from '../src/payments-service.js';
import type { PaymentsServiceOptions } from '../src/payments-service.js';

const FAST_GROUP = {
  sessionTimeout: 6_000,
  heartbeatInterval: 500,
  rebalanceTimeout: 4_000,
  maxWaitTimeInMs: 100,
};
const FINAL = ['processed', 'duplicate', 'dead-letter'] as const;

let schema: TestSchema;
let db: Kysely<PaymentsDatabase>;
let kafka: Kafka;
let provider: FakePaymentProvider;

beforeAll(async () => {
  kafka = new Kafka({
    clientId: 'payments-example-test',
    brokers: requireService('kafka').brokers,
    logLevel: logLevel.NOTHING,
  });
  schema = await createTestSchema('payments_kafka');
  db = new Kysely<PaymentsDatabase>({ dialect: new PostgresDialect({ pool: schema.pool }) });
  provider = await startFakePaymentProvider();
});

afterAll(async () => {
  await provider?.close();
  await schema?.cleanup();
});

/** A fresh topic and DLQ; the service on them; a publisher. */
async function serviceOnFreshTopic(consumer: PaymentsServiceOptions['consumer'] = {}) {
  const topic = uniqueName('payments');
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic, numPartitions: 3 }, { topic: `${topic}.dlq` }],
  });
  await admin.disconnect();
  const recorder = new OutcomeRecorder();
  const service = await startPaymentsService({
    db,
    inboxSchema: schema.schema,
    kafka,
    topic,
    groupId: uniqueName('payments'),
    providerUrl: provider.url,
    consumerConfig: FAST_GROUP,
    consumer: { backoff: { initialDelayMs: 50, jitter: 'none' }, ...consumer },
    onOutcome: recorder.hook,
  });
  const publisher = kafkaPublisher({ kafka });
  return {
    topic,
    recorder,
    publish: (payments: readonly Record<string, unknown>[]) =>
      publisher.publish(
        payments.map((p) => ({
          destination: topic,
          id: String(p['paymentId']),
          key: String(p['paymentId']),
          body: JSON.stringify(p),
        })),
      ),
    stop: async () => {
      await service.stop();
      await publisher.close();
    },
  };
}

function payment(paymentId: string, card = 'tok_visa') {
  return { paymentId, amountCents: 2_500, currency: 'EUR', card };
}

async function readDeadLetters(topic: string): Promise<DeadLetterEntry[]> {
  const reader = kafkaDeadLetterQueue({
    kafka,
    topic: `${topic}.dlq`,
    idleTimeoutMs: 2_000,
    consumerConfig: FAST_GROUP,
  });
  const entries: DeadLetterEntry[] = [];
  for await (const entry of reader.browse({ limit: 100 })) entries.push(entry);
  await reader.close();
  return entries;
}

describe('payments over Kafka, leased mode', () => {
  it('charges each payment once through a double click, a lost provider response and a declined card', async () => {
    const ids = ['a', 'b', 'c', 'd'].map((s) => uniqueName(`pay-${s}`));
    const [plain, doubleClicked, lostResponse, declined] = ids as [string, string, string, string];
    const service = await serviceOnFreshTopic();
    try {
      provider.loseNextResponse(lostResponse);
      await service.publish([
        payment(plain),
        payment(doubleClicked),
        payment(lostResponse),
        payment(declined, DECLINED_CARD),
        payment(doubleClicked),
      ]);
      await service.recorder.waitForCount(5, { status: [...FINAL], timeoutMs: 60_000 });

      expect(service.recorder.outcomes(doubleClicked).map((o) => o.status)).toEqual([
        'processed',
        'duplicate',
      ]);
      expect(service.recorder.outcomes(lostResponse).map((o) => o.status)).toEqual(['retry', 'processed']);
      expect(service.recorder.outcomes(declined)).toMatchObject([
        { status: 'dead-letter', reason: 'permanent-error' },
      ]);
      // The provider saw the lost-response payment twice, with one key, and charged it once.
      const requests = provider.requests().filter((r) => r.paymentId === lostResponse);
      expect(requests.map((r) => [r.result, r.responseLost])).toEqual([
        ['charged', true],
        ['replayed', false],
      ]);
      expect(new Set(requests.map((r) => r.idempotencyKey))).toEqual(
        new Set([downstreamKey('payments', lostResponse)]),
      );
      for (const id of [plain, doubleClicked, lostResponse]) expect(provider.chargesFor(id), id).toBe(1);
      expect(provider.chargesFor(declined)).toBe(0);
      const rows = await db
        .selectFrom('payments')
        .select('payment_id')
        .where('payment_id', 'in', ids)
        .execute();
      expect(rows.map((r) => r.payment_id).sort()).toEqual([plain, doubleClicked, lostResponse].sort());
    } finally {
      await service.stop();
    }
    const letters = await readDeadLetters(service.topic);
    expect(letters.map((l) => [l.id, l.headers['x-inboxkit-reason']])).toEqual([
      [declined, 'permanent-error'],
    ]);
  }, 120_000);

  it('without the downstream key, the same lost response charges the customer twice', async () => {
    // The bug this example exists to prevent: a key that changes per attempt is no key at all.
    const id = uniqueName('pay-nokey');
    const service = await serviceOnFreshTopic({ idempotencyKey: () => randomUUID() });
    try {
      provider.loseNextResponse(id);
      await service.publish([payment(id)]);
      await service.recorder.waitFor(id, 'processed', { timeoutMs: 60_000 });
    } finally {
      await service.stop();
    }
    expect(provider.chargesFor(id)).toBe(2);
    // The inbox still applied the payment row once: exactly-once effect covers the database, not the provider.
    const rows = await db.selectFrom('payments').select('payment_id').where('payment_id', '=', id).execute();
    expect(rows).toHaveLength(1);
  }, 120_000);

  it('passes assertIdempotentHandler: one charge per message, however it is delivered', async () => {
    const store = new PostgresInboxStore<PaymentsDatabase>({ db, schema: schema.schema });
    await migrateInbox(db, { schema: schema.schema });
    await createPaymentsTable(db);
    const consumer = paymentsConsumer({
      store,
      providerUrl: provider.url,
      // A short lease: in the parallel scenario the other deliveries are told to retry after it, one by one.
      leaseMs: 1_000,
      handlerTimeoutMs: 500,
      backoff: { initialDelayMs: 20, jitter: 'none' },
    });
    const report = await assertIdempotentHandler(
      consumer,
      ({ id }) => ({ id, body: JSON.stringify(payment(id)) }),
      {
        // The effect that matters is the charge: count the provider's charges under this message's key.
        countEffects: ({ id }) =>
          provider.charges().filter((c) => c.idempotencyKey === downstreamKey('payments', id)).length,
        parallel: 5,
      },
    );
    expect(report.passed).toBe(true);
  }, 120_000);
});
