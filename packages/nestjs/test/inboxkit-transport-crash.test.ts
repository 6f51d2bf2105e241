// A Nest consumer process against real RabbitMQ and Postgres: SIGKILLed after a message's effect committed and
// before its ack, the redelivery to the next process is a duplicate (one effect); and a SIGTERM with
// enableShutdownHooks() drains the message in flight (effect committed, acked) before the process exits.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { amqpUrl } from '../../rabbitmq/test/amqp-service.js';
import { rabbitmqHarness, type RabbitmqHarness } from '../../rabbitmq/test/rabbitmq-harness.js';
import { eventually as poll } from '../../../test/support/eventually.js';
import { openNestTestDatabase, type NestTestDatabase } from './support/nest-database.js';
import { startNestProcess, type NestProcess } from './support/nest-process.js';
import { requireService } from '../../../test/support/services.js';

const eventually = (check: () => Promise<boolean>): Promise<void> => poll(check, 90_000);

let database: NestTestDatabase;
let harness: RabbitmqHarness;
const processes: NestProcess[] = [];

beforeAll(async () => {
  database = await openNestTestDatabase('nest_crash');
  harness = await rabbitmqHarness();
});

afterAll(async () => {
  await Promise.all(processes.map((p) => p.kill('SIGKILL')));
  await harness?.dispose();
  await database?.close();
});

async function start(options: { crash?: 'after-commit-before-ack'; hold?: boolean }): Promise<NestProcess> {
  const p = await startNestProcess({
    connectionString: requireService('postgres').url,
    schema: database.schema,
    amqpUrl: amqpUrl(),
    queue: harness.queue,
    topology: harness.topology,
    ...options,
  });
  processes.push(p);
  return p;
}

async function inboxStatus(id: string): Promise<string | undefined> {
  const { rows } = await database.pool.query<{ status: string }>(
    `SELECT status FROM "${database.schema}".inbox WHERE message_id = $1`,
    [id],
  );
  return rows[0]?.status;
}

describe('InboxkitTransport in a Nest process', () => {
  it('SIGKILLed between the committed effect and the ack: the redelivery is a duplicate, one effect', async () => {
    const id = randomUUID();
    const dying = await start({ crash: 'after-commit-before-ack' });
    await harness.publish([{ id, body: JSON.stringify({ n: 1 }) }]);
    expect(await dying.exited).toBe('SIGKILL');
    expect(await database.effects(id)).toBe(1);
    // Unacked when the process died: the broker holds it for the next consumer.
    await eventually(async () => (await harness.messageCount(harness.queue)) === 1);
    const next = await start({});
    await eventually(async () => (await harness.messageCount(harness.queue)) === 0);
    expect(await database.effects(id)).toBe(1);
    expect(await inboxStatus(id)).toBe('completed');
    await next.kill('SIGTERM');
  }, 180_000);

  it('drains the message in flight on SIGTERM (enableShutdownHooks): committed and acked before the exit', async () => {
    const id = randomUUID();
    const p = await start({ hold: true });
    await harness.publish([{ id, body: JSON.stringify({ n: 2 }) }]);
    await p.printed(`handling ${id}`);
    const how = await p.kill('SIGTERM');
    expect(['0', 'SIGTERM']).toContain(how);
    expect(await database.effects(id)).toBe(1);
    expect(await inboxStatus(id)).toBe('completed');
    expect(await harness.messageCount(harness.queue)).toBe(0);
  }, 180_000);
});
