// The outbox against real RabbitMQ and Postgres, end to end: handler (inbox + outbox) → relay → RabbitMQ →
// a downstream idempotentConsumer whose inbox applies each message once, even when a relay was SIGKILLed
// between the broker's confirm and mark-dispatched and the row went out twice with the same id.

import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { idempotentConsumer, type InboundMessage } from '@inboxkit/core';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { rabbitmqPublisher } from '@inboxkit/rabbitmq';
import amqp, { type ConfirmChannel, type ChannelModel } from 'amqplib';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService, uniqueTestName } from '../../../test/support/services.js';
import { enqueue, startOutboxRelay } from '../src/index.js';
import { openOutboxDb, waitFor, type OutboxTestDb } from './support.js';

const execFileAsync = promisify(execFile);
const FIXTURE = fileURLToPath(new URL('./fixtures/crashing-relay.ts', import.meta.url));

describe('outbox relay on RabbitMQ', () => {
  let t: OutboxTestDb;
  let connection: ChannelModel;
  let channel: ConfirmChannel;
  const exchange = uniqueTestName('outbox-ex');
  const queue = uniqueTestName('outbox-q');
  /** Every copy the broker delivered downstream. */
  const received: InboundMessage[] = [];

  beforeAll(async () => {
    t = await openOutboxDb('outbox_rabbit');
    await migrateInbox(t.db, { schema: t.schema.schema });
    await sql`CREATE TABLE ${sql.raw(`"${t.schema.schema}"."effects"`)} (message_id text NOT NULL, body text NOT NULL)`.execute(t.db);
    connection = await amqp.connect(requireService('rabbitmq').url);
    channel = await connection.createConfirmChannel();
    await channel.assertExchange(exchange, 'direct', { durable: false, autoDelete: true });
    await channel.assertQueue(queue, { durable: false, autoDelete: true });
    await channel.bindQueue(queue, exchange, 'orders');
    await channel.consume(queue, (msg) => {
      if (msg === null) return;
      received.push({
        id: typeof msg.properties.messageId === 'string' ? msg.properties.messageId : undefined,
        body: msg.content.toString('utf8'),
        headers: {},
        source: { transport: 'rabbitmq', destination: queue },
      });
      channel.ack(msg);
    });
  });
  afterAll(async () => {
    await connection?.close().catch(() => {});
    await t?.close();
  });

  it('re-publishes with the same id after a SIGKILL between confirm and mark-dispatched; the downstream inbox applies it once', async () => {
    const schema = t.schema.schema;
    // Upstream: a handler that enqueues in its transaction.
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(
        await t.db.transaction().execute((tx) =>
          enqueue(tx, { publisher: 'rabbit', destination: exchange, routingKey: 'orders', key: 'o1', body: JSON.stringify({ n: i }) }, { schema }),
        ),
      );
    }

    // A relay dies right after the broker confirmed the first row.
    const crash = await execFileAsync(process.execPath, ['--import', 'tsx', '--conditions=@inboxkit/source', FIXTURE, requireService('postgres').url, schema, requireService('rabbitmq').url], {
      timeout: 60_000,
    }).then(
      () => ({ signal: null as string | null, stdout: '' }),
      (error: { signal?: string; stdout?: string }) => ({ signal: error.signal ?? null, stdout: error.stdout ?? '' }),
    );
    expect(crash.signal).toBe('SIGKILL');
    expect(crash.stdout).toContain('published 1');
    await waitFor(() => received.length >= 1);
    expect(received[0]?.id).toBe(ids[0]);

    // A healthy relay takes over: the first row again (same id), then the rest, in key order.
    const relay = startOutboxRelay({ db: t.db, publishers: { rabbit: rabbitmqPublisher({ channel }) }, schema, pollIntervalMs: 20 });
    await waitFor(() => received.length >= 4);
    await relay.stop();
    expect(received.map((m) => m.id)).toEqual([ids[0], ids[0], ids[1], ids[2]]);

    // Downstream: the inbox turns the duplicate into no effect.
    const store = new PostgresInboxStore({ db: t.db, schema });
    const consumer = idempotentConsumer<{ n: number }, Transaction<unknown>>({
      name: 'downstream',
      store,
      handler: async (message, context) => {
        await sql`INSERT INTO ${sql.raw(`"${schema}"."effects"`)} VALUES (${message.id}, ${JSON.stringify(message.payload)})`.execute(context.tx);
      },
    });
    const outcomes = [];
    for (const message of received) outcomes.push((await consumer.handle(message)).status);
    expect(outcomes).toEqual(['processed', 'duplicate', 'processed', 'processed']);
    const { rows } = await sql<{ message_id: string; n: string }>`SELECT message_id, count(*) AS n FROM ${sql.raw(`"${schema}"."effects"`)}
      GROUP BY message_id`.execute(t.db);
    expect(rows.map((r) => [r.message_id, Number(r.n)]).sort()).toEqual(ids.map((id) => [id, 1]).sort());
    expect(await t.backlog()).toBe(0);
  });

  it('parks at once, with its reason, a row whose headers amqplib cannot encode; the rows behind it on the same key go out', async () => {
    // Hardening issue, item 3: the row's message is refused on every attempt (headers over amqplib's 64 KiB
    // table). It used to be retried as if the broker were down — rescheduled until parkAfterMs (24 h), the
    // rows behind it on its key held all that time. Now the publisher throws a MessageTooLargeError (not
    // retriable) naming the message, and the relay parks that row at once.
    const schema = t.schema.schema;
    const key = uniqueTestName('big-key');
    const big = await t.db.transaction().execute((tx) =>
      enqueue(tx, { publisher: 'rabbit', destination: exchange, routingKey: 'orders', key, body: '{}', headers: { 'x-blob': 'b'.repeat(70_000) } }, { schema }),
    );
    const behind = await t.db.transaction().execute((tx) =>
      enqueue(tx, { publisher: 'rabbit', destination: exchange, routingKey: 'orders', key, body: '{"behind":true}' }, { schema }),
    );
    const relay = startOutboxRelay({ db: t.db, publishers: { rabbit: rabbitmqPublisher({ channel }) }, schema, pollIntervalMs: 20, backoff: { initialDelayMs: 10, maxDelayMs: 10 } });
    try {
      await waitFor(() => received.some((m) => m.id === behind));
    } finally {
      await relay.stop();
    }
    expect(received.some((m) => m.id === big)).toBe(false);
    const { rows } = await sql<{ parked_at: Date | null; last_error: string; attempts: number }>`SELECT parked_at, last_error, attempts
      FROM ${sql.raw(`"${schema}"."outbox"`)} WHERE id = ${big}`.execute(t.db);
    expect(rows[0]?.parked_at).not.toBeNull();
    expect(rows[0]?.last_error).toContain('MessageTooLargeError');
    // Tried once, not retried.
    expect(rows[0]?.attempts).toBe(1);
  });
});
