// @EventPattern handlers of a real Nest application run by InboxkitTransport over inboxkit's RabbitMQ consumer,
// against the real broker and Postgres: effects through @InboxTx() commit once, failures are retried or
// dead-lettered with their reason — a PermanentError and a payload refused by a pipe at once.

import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import {
  BadRequestException,
  Controller,
  Injectable,
  Module,
  type INestApplication,
  type PipeTransform,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, Payload } from '@nestjs/microservices';
import { PermanentError, type OutcomeEvent } from '@inboxkit/core';
import { rabbitmqConsumer } from '@inboxkit/rabbitmq';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Inboxkit } from '../src/index.js';
import { InboxContext, InboxCtx, InboxkitTransport, InboxTx } from '../src/transport/index.js';
import { rabbitmqHarness, type RabbitmqHarness } from '../../rabbitmq/test/rabbitmq-harness.js';
import { amqpUrl } from '../../rabbitmq/test/amqp-service.js';
import {
  openNestTestDatabase,
  testInboxkitModule,
  type NestTestDatabase,
  type NestTestDB,
} from './support/nest-database.js';
import { eventually as poll } from '../../../test/support/eventually.js';

/** Waits (generously: the machine is shared) for a state, never for a time. */
const eventually = (check: () => boolean | Promise<boolean>): Promise<void> =>
  poll(async () => check(), 60_000);

const Order = z.object({ amount: z.number(), kind: z.enum(['ok', 'permanent', 'fail-once']).default('ok') });
type Order = z.infer<typeof Order>;

/** Handler runs by message id. */
const runs = new Map<string, number>();

@Injectable()
class RejectNegativeAmount implements PipeTransform {
  transform(value: { amount: number }): { amount: number } {
    if (value.amount < 0) throw new BadRequestException(['amount must not be negative']);
    return value;
  }
}

@Controller()
class OrdersController {
  @EventPattern<string>('orders.placed')
  async placed(
    @Payload() order: Order,
    @InboxTx() tx: Transaction<NestTestDB>,
    @InboxCtx() ctx: InboxContext,
  ): Promise<void> {
    runs.set(ctx.message.id, (runs.get(ctx.message.id) ?? 0) + 1);
    if (order.kind === 'permanent') throw new PermanentError('this order can never be placed');
    if (order.kind === 'fail-once' && ctx.attempt === 1) throw new Error('a transient failure');
    await tx.insertInto('effects').values({ consumer: ctx.consumer, message_id: ctx.message.id }).execute();
  }

  @EventPattern<string>('orders.checked')
  async checked(
    @Payload(RejectNegativeAmount) _order: { amount: number },
    @InboxTx() tx: Transaction<NestTestDB>,
    @InboxCtx() ctx: InboxContext,
  ): Promise<void> {
    runs.set(ctx.message.id, (runs.get(ctx.message.id) ?? 0) + 1);
    await tx.insertInto('effects').values({ consumer: ctx.consumer, message_id: ctx.message.id }).execute();
  }
}

let database: NestTestDatabase;
let placed: RabbitmqHarness;
let checked: RabbitmqHarness;
let app: INestApplication;
const outcomes: OutcomeEvent[] = [];

const outcomeOf = (id: string): OutcomeEvent['outcome'][] =>
  outcomes.filter((e) => e.message.id === id).map((e) => e.outcome);

beforeAll(async () => {
  database = await openNestTestDatabase('nest_rmq');
  placed = await rabbitmqHarness();
  checked = await rabbitmqHarness();
  @Module({
    imports: [testInboxkitModule(database, outcomes)],
    controllers: [OrdersController],
  })
  class AppModule {}
  app = await NestFactory.create(AppModule, { logger: false });
  const connect = () => amqp.connect(amqpUrl());
  app.connectMicroservice(
    {
      strategy: new InboxkitTransport({
        inboxkit: app.get(Inboxkit),
        consumers: [
          {
            pattern: 'orders.placed',
            schema: Order,
            transport: (handler) =>
              rabbitmqConsumer({ connect, queue: placed.queue, handler, topology: placed.topology }),
          },
          {
            pattern: 'orders.checked',
            transport: (handler) =>
              rabbitmqConsumer({ connect, queue: checked.queue, handler, topology: checked.topology }),
          },
        ],
      }),
    },
    { inheritAppConfig: true },
  );
  await app.startAllMicroservices();
  await app.init();
});

afterAll(async () => {
  await app?.close();
  await placed?.dispose();
  await checked?.dispose();
  await database?.close();
});

const body = (value: unknown): string => JSON.stringify(value);

describe('InboxkitTransport over RabbitMQ', () => {
  it('applies each message once through @InboxTx(): a redelivered duplicate is acked without a second effect', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await placed.publish([
      { id: a, body: body({ amount: 1 }) },
      { id: b, body: body({ amount: 2 }) },
      { id: a, body: body({ amount: 1 }) },
    ]);
    await eventually(() => outcomeOf(a).length === 2 && outcomeOf(b).length === 1);
    expect(
      outcomeOf(a)
        .map((o) => o.status)
        .sort(),
    ).toEqual(['duplicate', 'processed']);
    expect(await database.effects(a)).toBe(1);
    expect(await database.effects(b)).toBe(1);
    expect(runs.get(a)).toBe(1);
    await eventually(async () => (await placed.messageCount(placed.queue)) === 0);
  });

  it('retries a failed attempt and applies the effect once on the next', async () => {
    const id = randomUUID();
    await placed.publish([{ id, body: body({ amount: 3, kind: 'fail-once' }) }]);
    await eventually(() => outcomeOf(id).some((o) => o.status === 'processed'));
    expect(outcomeOf(id).map((o) => o.status)).toEqual(['retry', 'processed']);
    expect(await database.effects(id)).toBe(1);
  });

  it('dead-letters a PermanentError at once with its reason: the original error crosses Nest', async () => {
    const id = randomUUID();
    await placed.publish([{ id, body: body({ amount: 4, kind: 'permanent' }) }]);
    const [letter] = await placed.readDeadLetters(1, 30_000);
    expect(letter?.id).toBe(id);
    expect(letter?.headers['x-inboxkit-reason']).toBe('permanent-error');
    expect(letter?.headers['x-inboxkit-error-name']).toBe('PermanentError');
    expect(runs.get(id)).toBe(1);
    expect(await database.effects(id)).toBe(0);
  });

  it("dead-letters a payload the binding's schema refuses as schema-invalid, without running the handler", async () => {
    const id = randomUUID();
    await placed.publish([{ id, body: body({ amount: 'lots' }) }]);
    const [letter] = await placed.readDeadLetters(1, 30_000);
    expect(letter?.id).toBe(id);
    expect(letter?.headers['x-inboxkit-reason']).toBe('schema-invalid');
    expect(runs.get(id)).toBeUndefined();
  });

  it('dead-letters a payload a pipe refuses with 400 at once (ValidationPipe style), not after maxAttempts', async () => {
    const id = randomUUID();
    await checked.publish([{ id, body: body({ amount: -1 }) }]);
    const [letter] = await checked.readDeadLetters(1, 30_000);
    expect(letter?.id).toBe(id);
    expect(letter?.headers['x-inboxkit-reason']).toBe('permanent-error');
    expect(letter?.headers['x-inboxkit-error-name']).toBe('SchemaValidationError');
    expect(letter?.headers['x-inboxkit-error-message']).toContain('amount must not be negative');
    expect(letter?.headers['x-inboxkit-attempts']).toBe('1');
    const ok = randomUUID();
    await checked.publish([{ id: ok, body: body({ amount: 1 }) }]);
    await eventually(async () => (await database.effects(ok)) === 1);
  });

  it('reports the store reachable and the transport running in Inboxkit.health()', async () => {
    const health = await app.get(Inboxkit).health();
    expect(health).toEqual({
      healthy: true,
      store: { reachable: true },
      transports: [{ state: 'running', consumers: ['orders.placed', 'orders.checked'] }],
    });
  });
});
