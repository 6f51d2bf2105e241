// The outbox against real SQS (ElasticMQ) and Postgres: while the endpoint is unreachable the backlog grows
// and nothing is lost; a relay with a working client drains it into a FIFO queue in per-group order, and a
// downstream idempotentConsumer applies each row once.

import { DeleteMessageCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { idempotentConsumer, type InboundMessage } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { sqsPublisher } from '@inboxkit/sqs';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshQueues, testSqsClient } from '../../sqs/test/support/sqs-test-client.js';
import { requireService } from '../../../test/support/services.js';
import { enqueue, startOutboxRelay } from '../src/index.js';
import { openOutboxDb, waitFor, type OutboxTestDb } from './support.js';

describe('outbox relay on SQS', () => {
  let t: OutboxTestDb;
  const client = testSqsClient();
  let queueUrl = '';

  beforeAll(async () => {
    t = await openOutboxDb('outbox_sqs');
    await migrateInbox(t.db, { schema: t.schema.schema });
    await sql`CREATE TABLE ${sql.raw(`"${t.schema.schema}"."effects"`)} (message_id text NOT NULL)`.execute(
      t.db,
    );
    queueUrl = (await freshQueues(client, 'outbox-sqs', { fifo: true })).queueUrl;
  });
  afterAll(async () => {
    client.destroy();
    await t?.close();
  });

  it('keeps the backlog while SQS is unreachable, then drains it in group order with one effect per id', async () => {
    const schema = t.schema.schema;
    const ids: string[] = [];
    await t.db.transaction().execute(async (tx) => {
      for (let i = 0; i < 30; i++) {
        ids.push(
          await enqueue(
            tx,
            { publisher: 'sqs', destination: queueUrl, key: `g${i % 3}`, body: JSON.stringify({ i }) },
            { schema },
          ),
        );
      }
    });

    const sqs = requireService('sqs');
    const unreachable = new SQSClient({
      endpoint: 'http://127.0.0.1:9',
      region: sqs.region,
      credentials: sqs.credentials,
      maxAttempts: 1,
    });
    const down = startOutboxRelay({
      db: t.db,
      publishers: { sqs: sqsPublisher({ client: unreachable }) },
      schema,
      pollIntervalMs: 10,
      backoff: { initialDelayMs: 5, maxDelayMs: 20 },
    });
    await waitFor(async () => {
      const { rows } = await sql<{
        n: string;
      }>`SELECT count(*) AS n FROM ${sql.raw(`"${schema}"."outbox"`)} WHERE attempts >= 2`.execute(t.db);
      return Number(rows[0]?.n) >= 3;
    });
    await down.stop();
    unreachable.destroy();
    expect(await t.backlog()).toBe(30);

    const up = startOutboxRelay({
      db: t.db,
      publishers: { sqs: sqsPublisher({ client }) },
      schema,
      pollIntervalMs: 10,
    });
    await waitFor(async () => (await t.backlog()) === 0, 60_000);
    await up.stop();

    const received: InboundMessage[] = [];
    await waitFor(async () => {
      const { Messages = [] } = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 10,
          MessageAttributeNames: ['All'],
          WaitTimeSeconds: 1,
        }),
      );
      for (const m of Messages) {
        received.push({
          id: m.MessageAttributes?.['message-id']?.StringValue,
          body: m.Body ?? null,
          headers: {},
          source: { transport: 'sqs', destination: queueUrl },
        });
        await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
      }
      return received.length >= 30;
    }, 60_000);

    expect(received.map((m) => m.id).sort()).toEqual([...ids].sort());
    for (let g = 0; g < 3; g++) {
      const order = received.map((m) => m.id).filter((id) => ids.indexOf(id!) % 3 === g);
      expect(order).toEqual(ids.filter((_, i) => i % 3 === g));
    }
    const sink = idempotentConsumer<{ i: number }, Transaction<unknown>>({
      name: 'sqs-sink',
      store: new PostgresInboxStore({ db: t.db, schema }),
      handler: async (message, context) => {
        await sql`INSERT INTO ${sql.raw(`"${schema}"."effects"`)} VALUES (${message.id})`.execute(context.tx);
      },
    });
    for (const message of [...received, ...received.slice(0, 5)]) await sink.handle(message);
    const { rows } = await sql<{
      n: string;
    }>`SELECT count(DISTINCT message_id) AS n, count(*) AS total FROM ${sql.raw(`"${schema}"."effects"`)}`.execute(
      t.db,
    );
    expect(rows[0]).toMatchObject({ n: '30', total: '30' });
  });

  it('parks at once, with its reason, a row too large for SQS; the rows behind it on the same group go out', async () => {
    // The SQS publisher used to report a message over the queue's size limit as a retriable PublishError, so the
    // row was rescheduled until parkAfterMs (24 h) and its group's later rows waited all that time.
    const schema = t.schema.schema;
    const key = `big-${Date.now()}`;
    const big = await t.db
      .transaction()
      .execute((tx) =>
        enqueue(tx, { publisher: 'sqs', destination: queueUrl, key, body: 'b'.repeat(300_000) }, { schema }),
      );
    const behind = await t.db
      .transaction()
      .execute((tx) =>
        enqueue(tx, { publisher: 'sqs', destination: queueUrl, key, body: '{"behind":true}' }, { schema }),
      );
    const relay = startOutboxRelay({
      db: t.db,
      publishers: { sqs: sqsPublisher({ client }) },
      schema,
      pollIntervalMs: 20,
      backoff: { initialDelayMs: 10, maxDelayMs: 10 },
    });
    const seen: string[] = [];
    try {
      await waitFor(async () => {
        const { Messages = [] } = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            MessageAttributeNames: ['All'],
            WaitTimeSeconds: 1,
          }),
        );
        for (const m of Messages) {
          seen.push(m.MessageAttributes?.['message-id']?.StringValue ?? '');
          await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
        }
        return seen.includes(behind);
      }, 60_000);
    } finally {
      await relay.stop();
    }
    expect(seen).not.toContain(big);
    const { rows } = await sql<{
      parked_at: Date | null;
      last_error: string;
      attempts: number;
    }>`SELECT parked_at, last_error, attempts
      FROM ${sql.raw(`"${schema}"."outbox"`)} WHERE id = ${big}`.execute(t.db);
    expect(rows[0]?.parked_at).not.toBeNull();
    expect(rows[0]?.last_error).toContain('MessageTooLargeError');
    expect(rows[0]?.attempts).toBe(1);
  });
});
