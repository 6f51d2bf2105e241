// The example service against the shared Postgres and RabbitMQ: a payment posted twice with one key charges
// once; an order published twice is inserted once.

import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import type { INestApplication } from '@nestjs/common';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestSchema, requireService, type TestSchema } from '../../../test/support/services.js';
import { eventually } from '../../../test/support/eventually.js';
import { startService } from '../src/orders-service.js';

let t: TestSchema;
let app: INestApplication;
let url: string;
const queue = `orders-nestjs-example-${randomUUID()}`;

beforeAll(async () => {
  t = await createTestSchema('nest_example', { max: 10 });
  ({ app, url } = await startService({
    pool: t.pool,
    schema: t.schema,
    amqpUrl: requireService('rabbitmq').url,
    queue,
    port: 0,
  }));
});

afterAll(async () => {
  await app?.close();
  await t?.cleanup();
});

it('charges once for a payment posted twice with one Idempotency-Key, and replays the response', async () => {
  const post = () =>
    fetch(`${url}/payments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'pay-1', 'x-customer': 'c-1' },
      body: JSON.stringify({ amountCents: 1200 }),
    });
  const first = await post();
  const second = await post();
  expect(first.status).toBe(201);
  expect(second.status).toBe(201);
  expect(await second.text()).toBe(await first.text());
  const { rows } = await t.pool.query('SELECT count(*)::int AS n FROM payments');
  expect(rows[0].n).toBe(1);
});

it('inserts an order published twice once', async () => {
  const connection = await amqp.connect(requireService('rabbitmq').url);
  try {
    const channel = await connection.createConfirmChannel();
    const body = Buffer.from(JSON.stringify({ orderId: 'o-1', totalCents: 500 }));
    for (let i = 0; i < 2; i++)
      channel.sendToQueue(queue, body, { messageId: 'order-o-1', persistent: true });
    await channel.waitForConfirms();
  } finally {
    await connection.close();
  }
  await eventually(async () => {
    const { rows } = await t.pool.query(
      `SELECT count(*)::int AS n FROM "${t.schema}".inbox WHERE message_id = 'order-o-1' AND status = 'completed'`,
    );
    return rows[0].n === 1;
  }, 60_000);
  const { rows } = await t.pool.query(`SELECT count(*)::int AS n FROM orders WHERE order_id = 'o-1'`);
  expect(rows[0].n).toBe(1);
});
