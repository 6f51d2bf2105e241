// What counts as an attempt on SQS: a handler run, never a receive. A Postgres outage costs no attempt and
// dead-letters nothing (the messages wait in the consumer, whose receives stop), and a process that dies with
// messages received but not started costs those messages nothing — however often it happens, while
// ApproximateReceiveCount climbs.

import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { idempotentConsumer } from '@inboxkit/core';
import type { TransportConsumer } from '@inboxkit/core';
import { PostgresInboxStore } from '@inboxkit/core/postgres';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { tcpProxy } from '../../../test/support/tcp-proxy.js';
import { sqsConsumer, sqsDeadLetterQueue, sqsPublisher } from '../src/index.js';
import type { CreatedQueues } from '../src/index.js';
import { KillableSqsClient } from './sqs-harness.js';
import { effectCounts, insertEffect, openTestDatabase } from './support/postgres.js';
import type { TestDatabase, TestDB, TestTx } from './support/postgres.js';
import { deleteQueues, freshQueues, testSqsClient } from './support/sqs-test-client.js';

const FAST_BACKOFF = { initialDelayMs: 100, multiplier: 2, maxDelayMs: 200, jitter: 'none' } as const;
const MAX_ATTEMPTS = 2;

let client: SQSClient;
let t: TestDatabase;
const created: CreatedQueues[] = [];

beforeAll(async () => {
  client = testSqsClient();
  t = await openTestDatabase('attempts');
});
afterAll(async () => {
  for (const q of created) await deleteQueues(client, q);
  client.destroy();
  await t?.close();
});

async function queues(prefix: string): Promise<CreatedQueues> {
  const q = await freshQueues(client, prefix, { maxAttempts: MAX_ATTEMPTS, headroom: 40 });
  created.push(q);
  return q;
}

async function deadLetters(q: CreatedQueues): Promise<string[]> {
  const ids: string[] = [];
  const dlq = sqsDeadLetterQueue({ client, queueUrl: q.deadLetterQueueUrl, waitTimeSeconds: 1 });
  try {
    for await (const entry of dlq.browse({ limit: 1_000 })) ids.push(entry.id ?? '(no id)');
  } finally {
    await dlq.close();
  }
  return ids;
}

async function receiveCounts(q: CreatedQueues): Promise<number> {
  const { Attributes: a = {} } = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: q.queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return Number(a.ApproximateNumberOfMessages) + Number(a.ApproximateNumberOfMessagesNotVisible);
}

function inboxConsumer(name: string, db: Kysely<TestDB>, recorder: OutcomeRecorder) {
  return idempotentConsumer<unknown, TestTx>({
    name,
    store: new PostgresInboxStore({ db, schema: t.schema }),
    maxAttempts: MAX_ATTEMPTS,
    handlerTimeoutMs: 1_500,
    backoff: FAST_BACKOFF,
    hooks: { onOutcome: recorder.hook },
    handler: async (message, { tx }) => insertEffect(tx, t.schema, { consumer: name, messageId: message.id }),
  });
}

describe('sqsConsumer attempts', () => {
  it(
    'dead-letters nothing and counts no attempt through a Postgres outage: the messages wait in the consumer until the store answers',
    { timeout: 60_000 },
    async () => {
      const q = await queues('pg-outage');
      const target = new URL(t.url);
      const proxy = await tcpProxy({ host: target.hostname, port: Number(target.port) });
      const url = new URL(t.url);
      url.hostname = '127.0.0.1';
      url.port = String(proxy.port);
      const pool = new pg.Pool({ connectionString: url.toString(), max: 6, connectionTimeoutMillis: 2_000 });
      pool.on('error', () => undefined);
      const db = new Kysely<TestDB>({ dialect: new PostgresDialect({ pool }) });
      const recorder = new OutcomeRecorder();
      const name = uniqueName('pg-outage');
      let consumer: TransportConsumer | undefined;
      try {
        // Postgres is unreachable for this consumer from the start: every claim fails.
        consumer = sqsConsumer({
          client,
          queueUrl: q.queueUrl,
          deadLetterQueueUrl: q.deadLetterQueueUrl,
          handler: inboxConsumer(name, db, recorder),
          concurrency: 4,
          prefetch: 0,
          visibilityTimeoutSeconds: 2,
          waitTimeSeconds: 1,
        });
        await consumer.start();
        const ids = Array.from({ length: 12 }, (_, n) => `${name}-${n}`);
        await sqsPublisher({ client }).publish(
          ids.map((id) => ({ destination: q.queueUrl, id, body: JSON.stringify({ id }) })),
        );
        // An outage long enough for a message handed back to SQS to be received again and again (visibility
        // 2 s, retry delay 0.1 s): the consumer must hold what it has and receive nothing more meanwhile.
        await recorder.waitForCount(1, { status: 'retry', timeoutMs: 20_000 });
        await new Promise((r) => setTimeout(r, 8_000));
        expect(recorder.count('processed')).toBe(0);
        await proxy.open();
        await recorder.waitForCount(ids.length, { status: 'processed', timeoutMs: 30_000 });
        const counts = await effectCounts(t.db, t.schema, name);
        expect(
          ids.filter((id) => counts.get(id) !== 1),
          'ids not applied exactly once',
        ).toEqual([]);
        expect(recorder.count('dead-letter')).toBe(0);
        expect(
          recorder.outcomes().flatMap((o) => (o.status === 'processed' ? [o.attempt] : [])),
          'each applied at its first attempt',
        ).toEqual(ids.map(() => 1));
        expect(
          recorder.outcomes().every((o) => o.status !== 'retry' || o.reason === 'store-unavailable'),
        ).toBe(true);
      } finally {
        await consumer?.stop();
        await db.destroy();
        await proxy.close();
      }
      expect(await deadLetters(q)).toEqual([]);
      expect(await receiveCounts(q)).toBe(0);
    },
  );

  it(
    'dead-letters nothing when a process dies three times holding messages it received but did not start (three copies of each id)',
    { timeout: 90_000 },
    async () => {
      const q = await queues('buffered');
      const name = uniqueName('buffered');
      const ids = Array.from({ length: 10 }, (_, n) => `${name}-${n}`);
      // Three copies of each id (a producer's duplicates): received again together, they must not count three
      // attempts of their id between them.
      await sqsPublisher({ client }).publish(
        ids.flatMap((id) =>
          [0, 1, 2].map(() => ({ destination: q.queueUrl, id, body: JSON.stringify({ id }) })),
        ),
      );
      const recorder = new OutcomeRecorder();
      for (let round = 0; round < 3; round += 1) {
        // One handler, nine messages waiting behind it: the first handler call of the round blocks until the
        // process "dies" (its SQS client fails every call; nothing is deleted or returned).
        const killable = new KillableSqsClient(client);
        let release: () => void = () => undefined;
        const blocked = new Promise<void>((resolve) => (release = resolve));
        let started: () => void = () => undefined;
        const running = new Promise<void>((resolve) => (started = resolve));
        let calls = 0;
        const handler = idempotentConsumer<unknown, TestTx>({
          ...inboxConsumer(name, t.db, recorder).config,
          handler: async (message, context) => {
            calls += 1;
            if (calls === 1) {
              started();
              await blocked;
            }
            await insertEffect(context.tx, t.schema, { consumer: name, messageId: message.id });
          },
        });
        const consumer = sqsConsumer({
          client: killable,
          queueUrl: q.queueUrl,
          deadLetterQueueUrl: q.deadLetterQueueUrl,
          handler,
          concurrency: 1,
          prefetch: 9,
          visibilityTimeoutSeconds: 2,
          waitTimeSeconds: 1,
          closeTimeoutMs: 2_000,
          checkQueues: false,
        });
        await consumer.start();
        // (Bounded: were the messages dead-lettered on receive, no handler would ever be called.)
        await Promise.race([running, new Promise((r) => setTimeout(r, 10_000))]);
        // Let the receives fill the buffer (ElasticMQ answers a long poll as soon as messages are there).
        await new Promise((r) => setTimeout(r, 1_000));
        killable.kill();
        release();
        await consumer.stop();
        // Back after the visibility timeout, each received once more.
        await new Promise((r) => setTimeout(r, 2_500));
      }
      const consumer = sqsConsumer({
        client,
        queueUrl: q.queueUrl,
        deadLetterQueueUrl: q.deadLetterQueueUrl,
        handler: inboxConsumer(name, t.db, recorder),
        concurrency: 10,
        visibilityTimeoutSeconds: 2,
        waitTimeSeconds: 1,
      });
      await consumer.start();
      try {
        const settled = async () => (await receiveCounts(q)) === 0;
        const deadline = Date.now() + 30_000;
        while (!(await settled()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      } finally {
        await consumer.stop();
      }
      const counts = await effectCounts(t.db, t.schema, name);
      expect(
        ids.filter((id) => counts.get(id) !== 1),
        'ids not applied exactly once',
      ).toEqual([]);
      expect(recorder.count('dead-letter'), recorder.describe()).toBe(0);
      expect(await deadLetters(q)).toEqual([]);
    },
  );
});
