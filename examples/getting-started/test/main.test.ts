// Runs src/main.ts, the service of docs/getting-started.md, as its own process against real Kafka and a fresh
// Postgres database: a double-published order is billed once, an order without an amount goes to the DLQ,
// and SIGTERM stops it cleanly.

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { kafkaPublisher } from '@inboxkit/kafka';
import { uniqueName } from '@inboxkit/testing';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, expect, it } from 'vitest';

import { createTestDatabase, requireService } from '../../../test/support/services.js';
import type { TestDatabase } from '../../../test/support/services.js';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

let database: TestDatabase;
let kafka: Kafka;
const topic = uniqueName('orders');
const group = uniqueName('billing');

beforeAll(async () => {
  kafka = new Kafka({
    clientId: 'getting-started-test',
    brokers: requireService('kafka').brokers,
    logLevel: logLevel.NOTHING,
  });
  database = await createTestDatabase('getting_started');
  await database.pool.query('CREATE TABLE invoices (order_id text, amount_cents integer, message_id text)');
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic }, { topic: `${topic}.dlq` }] });
  await admin.disconnect();
});

afterAll(async () => {
  await database?.cleanup();
  const admin = kafka.admin();
  await admin.connect();
  await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
  await admin.disconnect();
});

/** Polls `check` until it returns true (state in another process cannot be awaited directly). */
async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

it('bills a double-published order once, dead-letters a bad one, and stops on SIGTERM', async () => {
  const child = spawn(process.execPath, ['--conditions=@inboxkit/source', '--import', 'tsx', MAIN], {
    env: {
      ...process.env,
      DATABASE_URL: database.url,
      KAFKA_BROKERS: requireService('kafka').brokers.join(','),
      ORDERS_TOPIC: topic,
      KAFKA_GROUP: group,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exit = exited(child);
  try {
    // The group starts at the latest offset (kafkajs's default): publish once it owns the partition.
    const admin = kafka.admin();
    await admin.connect();
    await eventually(`group ${group} to be stable (service output:\n${output})`, async () => {
      const [description] = (await admin.describeGroups([group])).groups;
      return description?.state === 'Stable' && description.members.length === 1;
    });
    await admin.disconnect();

    const publisher = kafkaPublisher({ kafka });
    const order = { orderId: 'o-1', amountCents: 1_990 };
    await publisher.publish([
      { destination: topic, id: 'order-placed-o-1', key: 'o-1', body: JSON.stringify(order) },
      { destination: topic, id: 'order-placed-o-1', key: 'o-1', body: JSON.stringify(order) }, // the producer retried
      {
        destination: topic,
        id: 'order-placed-o-2',
        key: 'o-2',
        body: JSON.stringify({ orderId: 'o-2', amountCents: 0 }),
      },
    ]);
    await publisher.close();
    await eventually('the bad order to be dead-lettered', async () =>
      output.includes('dead-lettered order-placed-o-2: permanent-error'),
    );
    await eventually(
      'the invoice',
      async () => (await database.pool.query('SELECT 1 FROM invoices')).rowCount === 1,
    );

    child.kill('SIGTERM');
    expect(await exit).toBe(0);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  const { rows } = await database.pool.query<{ order_id: string; message_id: string }>(
    'SELECT order_id, message_id FROM invoices',
  );
  expect(rows).toEqual([{ order_id: 'o-1', message_id: 'order-placed-o-1' }]);
  const { rows: inbox } = await database.pool.query<{ message_id: string; status: string }>(
    'SELECT message_id, status FROM inboxkit.inbox ORDER BY message_id',
  );
  expect(inbox).toEqual([
    { message_id: 'order-placed-o-1', status: 'completed' },
    { message_id: 'order-placed-o-2', status: 'dead_lettered' },
  ]);
}, 120_000);
