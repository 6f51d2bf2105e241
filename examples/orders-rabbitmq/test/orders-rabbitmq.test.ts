// The orders service against real RabbitMQ and Postgres: every order applied once when every message arrives
// twice and an ack is lost after the commit; the order number stopping an order sent under a second id; an
// out-of-stock order dead-lettered without a trace in the tables; and assertIdempotentHandler.

import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import type { DeadLetterEntry, OutcomeEvent } from '@inboxkit/core';
import { rabbitmqDeadLetterQueue, rabbitmqPublisher, topologyNames } from '@inboxkit/rabbitmq';
import type { RabbitmqTopologySettings } from '@inboxkit/rabbitmq';
import { OutcomeRecorder, assertIdempotentHandler, uniqueName } from '@inboxkit/testing';
import amqp from 'amqplib';
import { Kysely, PostgresDialect } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createTestSchema, requireService } from '../../../test/support/services.js';
import type { TestSchema } from '../../../test/support/services.js';
import { createOrdersTables, ordersConsumer } from '../src/orders-consumer.js';
import type { OrdersDatabase, SecondGuardEvent } from '../src/orders-consumer.js';
import { startOrdersService } from '../src/orders-service.js';

const TOPOLOGY: RabbitmqTopologySettings = { delayBucketsMs: [100, 1_000], deliveryLimit: 20 };
const FINAL = ['processed', 'duplicate', 'dead-letter'] as const;

let schema: TestSchema;
let db: Kysely<OrdersDatabase>;
let url: string;
let admin: amqp.ChannelModel;

beforeAll(async () => {
  url = requireService('rabbitmq').url;
  schema = await createTestSchema('orders_rabbitmq');
  db = new Kysely<OrdersDatabase>({ dialect: new PostgresDialect({ pool: schema.pool }) });
  admin = await amqp.connect(url);
  admin.on('error', () => undefined);
  await migrateInbox(db, { schema: schema.schema });
  await createOrdersTables(db);
});

afterAll(async () => {
  await admin?.close().catch(() => undefined);
  await schema?.cleanup();
});

/** The service on a fresh queue; `hook` sees every outcome before the transport acks it. */
async function serviceOnFreshQueue(
  hook?: (event: OutcomeEvent, connections: readonly amqp.ChannelModel[]) => Promise<void>,
) {
  const queue = uniqueName('orders');
  const recorder = new OutcomeRecorder();
  const guarded: SecondGuardEvent[] = [];
  const connections: amqp.ChannelModel[] = [];
  const service = await startOrdersService({
    db,
    inboxSchema: schema.schema,
    connect: async () => {
      const connection = await amqp.connect(url);
      connections.push(connection);
      return connection;
    },
    queue,
    concurrency: 8,
    topology: TOPOLOGY,
    reconnect: { initialDelayMs: 100, maxDelayMs: 500 },
    consumer: {
      onSecondGuard: (event) => guarded.push(event),
      backoff: { initialDelayMs: 50, jitter: 'none' },
    },
    onOutcome: async (event) => {
      recorder.hook(event);
      await hook?.(event, connections);
    },
  });
  const channel = await admin.createConfirmChannel();
  channel.on('error', () => undefined);
  const publisher = rabbitmqPublisher({ channel });
  return {
    queue,
    recorder,
    guarded,
    publish: (messages: readonly { id: string; body: unknown }[]) =>
      publisher.publish(
        messages.map((m) => ({ destination: '', routingKey: queue, id: m.id, body: JSON.stringify(m.body) })),
      ),
    stop: async () => {
      await service.stop();
      await channel.close().catch(() => undefined);
    },
    deadLetters: async (): Promise<DeadLetterEntry[]> => {
      const reader = rabbitmqDeadLetterQueue({ connection: admin, queue, consumer: 'orders' });
      const entries: DeadLetterEntry[] = [];
      for await (const entry of reader.browse({ limit: 100 })) entries.push(entry);
      await reader.close();
      return entries;
    },
    cleanup: async () => {
      const ch = await admin.createChannel();
      const names = topologyNames(queue);
      for (const q of [
        queue,
        names.deadLetterQueue,
        ...TOPOLOGY.delayBucketsMs!.map((b) => names.delayQueue(b)),
      ])
        await ch.deleteQueue(q).catch(() => undefined);
      await ch.deleteExchange(names.deadLetterExchange).catch(() => undefined);
      await ch.close().catch(() => undefined);
    },
  };
}

async function seed(skus: Record<string, number>): Promise<void> {
  await db
    .insertInto('products')
    .values(Object.entries(skus).map(([sku, available]) => ({ sku, available })))
    .execute();
}

async function available(sku: string): Promise<number> {
  return (
    await db.selectFrom('products').select('available').where('sku', '=', sku).executeTakeFirstOrThrow()
  ).available;
}

// A fixed placedAt: every delivery of one message must carry the same payload, or the inbox dead-letters the
// second as `payload-mismatch` (a producer that re-serialises with a new timestamp would be caught the same way).
const PLACED_AT = '2026-06-01T12:00:00.000Z';

function order(orderNo: string, lines: readonly { sku: string; quantity: number }[]) {
  return {
    orderNo,
    customer: 'c-1',
    placedAt: PLACED_AT,
    lines: lines.map((l) => ({ ...l, priceCents: 500 })),
  };
}

describe('orders over RabbitMQ, transactional mode', () => {
  it('applies each order once when every message arrives twice and an ack is lost after the commit', async () => {
    const mug = uniqueName('mug');
    await seed({ [mug]: 1_000 });
    const orders = Array.from({ length: 20 }, (_, i) =>
      order(uniqueName(`ORD-${i}`), [{ sku: mug, quantity: i + 1 }]),
    );
    const lostAck = `msg-${orders[6]!.orderNo}`;
    let crashed = false;
    const service = await serviceOnFreshQueue(async (event, connections) => {
      // After this order's commit, before its ack: the consumer's connection drops, as when the process dies.
      if (!crashed && event.message.id === lostAck && event.outcome.status === 'processed') {
        crashed = true;
        await connections[connections.length - 1]?.close();
      }
    });
    try {
      const messages = orders.map((o) => ({ id: `msg-${o.orderNo}`, body: o }));
      await service.publish([...messages, ...messages]);
      // Each id ends processed once; every other delivery of it (the second copy, the redelivery) is a duplicate.
      for (const m of messages)
        await service.recorder.waitForCount(2, { id: m.id, status: [...FINAL], timeoutMs: 60_000 });
      await service.recorder.waitForCount(3, { id: lostAck, status: [...FINAL], timeoutMs: 60_000 });
    } finally {
      await service.stop();
      await service.cleanup();
    }
    expect(crashed).toBe(true);
    expect(service.recorder.count('processed')).toBe(20);
    expect(service.recorder.count('dead-letter')).toBe(0);
    // Processed once; its redelivery and its second copy (and any delivery the dropped connection took with it)
    // are duplicates.
    const [first, ...rest] = service.recorder.outcomes(lostAck).map((o) => o.status);
    expect(first).toBe('processed');
    expect(rest.length).toBeGreaterThanOrEqual(2);
    expect(new Set(rest)).toEqual(new Set(['duplicate']));
    const rows = await db
      .selectFrom('orders')
      .select(['order_no'])
      .where(
        'order_no',
        'in',
        orders.map((o) => o.orderNo),
      )
      .execute();
    expect(rows).toHaveLength(20);
    const lines = await db.selectFrom('order_lines').select(['order_no']).where('sku', '=', mug).execute();
    expect(lines).toHaveLength(20);
    // 1 + 2 + … + 20 = 210 mugs reserved, once.
    expect(await available(mug)).toBe(1_000 - 210);
  }, 120_000);

  it('stops an order published under a second message id with the order number', async () => {
    const poster = uniqueName('poster');
    await seed({ [poster]: 10 });
    const placed = order(uniqueName('ORD'), [{ sku: poster, quantity: 3 }]);
    const service = await serviceOnFreshQueue();
    try {
      // A producer that mints a new id per publish attempt: the inbox sees two messages.
      await service.publish([{ id: 'attempt-1', body: placed }]);
      await service.recorder.waitFor('attempt-1', 'processed', { timeoutMs: 30_000 });
      await service.publish([{ id: 'attempt-2', body: placed }]);
      await service.recorder.waitFor('attempt-2', 'processed', { timeoutMs: 30_000 });
    } finally {
      await service.stop();
      await service.cleanup();
    }
    expect(service.guarded).toEqual([
      { orderNo: placed.orderNo, messageId: 'attempt-2', firstMessageId: 'attempt-1' },
    ]);
    expect(
      await db.selectFrom('orders').select('order_no').where('order_no', '=', placed.orderNo).execute(),
    ).toHaveLength(1);
    expect(await available(poster)).toBe(7);
  }, 60_000);

  it('dead-letters an order that is out of stock, with its reason, and changes nothing', async () => {
    const lamp = uniqueName('lamp');
    await seed({ [lamp]: 1 });
    const placed = order(uniqueName('ORD'), [{ sku: lamp, quantity: 2 }]);
    const service = await serviceOnFreshQueue();
    let letters: DeadLetterEntry[];
    try {
      await service.publish([{ id: 'too-many-lamps', body: placed }]);
      await service.recorder.waitFor('too-many-lamps', 'dead-letter', { timeoutMs: 30_000 });
      await service.stop(); // settles the DLQ copy
      letters = await service.deadLetters();
    } finally {
      await service.stop();
      await service.cleanup();
    }
    expect(
      letters.map((l) => [l.id, l.headers['x-inboxkit-reason'], l.headers['x-inboxkit-error-code']]),
    ).toEqual([['too-many-lamps', 'permanent-error', 'OUT_OF_STOCK']]);
    expect(
      await db.selectFrom('orders').select('order_no').where('order_no', '=', placed.orderNo).execute(),
    ).toHaveLength(0);
    expect(await available(lamp)).toBe(1);
  }, 60_000);

  it('passes assertIdempotentHandler: one order per message, however it is delivered', async () => {
    const cup = uniqueName('cup');
    await seed({ [cup]: 1_000 });
    const consumer = ordersConsumer({
      store: new PostgresInboxStore<OrdersDatabase>({ db, schema: schema.schema }),
    });
    const report = await assertIdempotentHandler(
      consumer,
      ({ id }) => ({ id, body: JSON.stringify(order(id, [{ sku: cup, quantity: 1 }])) }),
      {
        countEffects: async ({ id }) =>
          (await db.selectFrom('order_lines').select('order_no').where('order_no', '=', id).execute()).length,
      },
    );
    expect(report.passed).toBe(true);
    expect(await available(cup)).toBe(1_000 - 4); // four scenarios, one order each
  }, 60_000);
});
