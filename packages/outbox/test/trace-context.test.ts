// W3C trace context through the outbox, on real Postgres and RabbitMQ: a row enqueued by a handler keeps the
// handler span's context; the relay sends it under a PRODUCER span that continues that trace, and what arrives
// downstream carries the send span's context, so the downstream consumer's span joins the producer's trace.

import { idempotentConsumer, type InboundMessage } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { rabbitmqPublisher } from '@inboxkit/rabbitmq';
import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireService, uniqueTestName } from '../../../test/support/services.js';
import { useTestTracing } from '../../../test/support/tracing.js';
import { enqueue, startOutboxRelay } from '../src/index.js';
import { openOutboxDb, waitFor, type OutboxTestDb } from './support.js';

const tracing = useTestTracing();

describe('trace context through the outbox', () => {
  let t: OutboxTestDb;
  let connection: ChannelModel;
  let channel: ConfirmChannel;
  const exchange = uniqueTestName('outbox-trace-ex');
  const queue = uniqueTestName('outbox-trace-q');
  const received: InboundMessage[] = [];

  beforeAll(async () => {
    t = await openOutboxDb('outbox_trace');
    await migrateInbox(t.db, { schema: t.schema.schema });
    connection = await amqp.connect(requireService('rabbitmq').url);
    channel = await connection.createConfirmChannel();
    await channel.assertExchange(exchange, 'direct', { durable: false, autoDelete: true });
    await channel.assertQueue(queue, { durable: false, autoDelete: true });
    await channel.bindQueue(queue, exchange, 'orders');
    await channel.consume(queue, (msg) => {
      if (msg === null) return;
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(msg.properties.headers ?? {})) if (typeof value === 'string') headers[name] = value;
      received.push({
        id: typeof msg.properties.messageId === 'string' ? msg.properties.messageId : headers['message-id'],
        body: msg.content.toString('utf8'),
        headers,
        source: { transport: 'rabbitmq', destination: queue },
      });
      channel.ack(msg);
    });
  });
  afterAll(async () => {
    await connection?.close().catch(() => {});
    await t?.close();
  });

  it("continues the producer's trace from the handler that enqueued, through the relay's send, to the downstream consumer", async () => {
    const schema = t.schema.schema;
    const upstream = idempotentConsumer<{ order: string }, Transaction<unknown>>({
      name: uniqueTestName('orders'),
      store: new PostgresInboxStore({ db: t.db, schema }),
      handler: async (message, ctx) => {
        await enqueue(ctx.tx, { destination: exchange, routingKey: 'orders', body: JSON.stringify(message.payload) }, { schema });
      },
    });
    const producer = tracing.producerSpan('send orders');
    const outcome = await upstream.handle({
      id: uniqueTestName('in'),
      body: JSON.stringify({ order: 'o-1' }),
      headers: producer.headers,
      source: { transport: 'rabbitmq', destination: 'orders' },
    });
    expect(outcome).toMatchObject({ status: 'processed' });
    const handlerSpan = tracing.spans('INTERNAL').find((s) => s.name === `handler ${upstream.name}`);
    expect(handlerSpan?.spanContext().traceId).toBe(producer.traceId);

    // The row keeps the context it was enqueued in: the handler's span.
    const { rows } = await sql<{ headers: Record<string, string> }>`SELECT headers FROM ${sql.raw(`"${schema}"."outbox"`)}`.execute(t.db);
    expect(rows).toHaveLength(1);
    expect(tracing.parseTraceparent(rows[0]!.headers['traceparent'])).toEqual({
      traceId: producer.traceId,
      parentId: handlerSpan!.spanContext().spanId,
    });

    const relay = startOutboxRelay({ db: t.db, publishers: { default: rabbitmqPublisher({ channel }) }, schema, pollIntervalMs: 20 });
    try {
      await waitFor(() => received.length >= 1);
    } finally {
      await relay.stop();
    }
    const send = tracing.spans('PRODUCER').find((s) => s.name === `send ${exchange}`);
    expect(send, "the relay's send span").toBeDefined();
    expect(send!.spanContext().traceId).toBe(producer.traceId);
    expect(send!.parentSpanContext?.spanId).toBe(handlerSpan!.spanContext().spanId);
    expect(tracing.parseTraceparent(received[0]!.headers['traceparent'])).toEqual({
      traceId: producer.traceId,
      parentId: send!.spanContext().spanId,
    });

    // Downstream, the consumer's span is a child of the relay's send.
    const downstream = idempotentConsumer({ name: uniqueTestName('downstream'), store: new InMemoryInboxStore(), handler: async () => {} });
    expect((await downstream.handle(received[0]!)).status).toBe('processed');
    const consumed = tracing.spans('CONSUMER').find((s) => s.attributes['messaging.consumer.group.name'] === downstream.name);
    expect(consumed?.spanContext().traceId).toBe(producer.traceId);
    expect(consumed?.parentSpanContext?.spanId).toBe(send!.spanContext().spanId);
  });
});
