// InboxkitTransport over inboxkit's NATS JetStream consumer, against the real NATS server and Postgres.
//
// 1. The shared transport conformance suite through the Nest strategy (the same parametrised harness the
//    RabbitMQ, SQS and Kafka runs use): natsConsumer behind an @EventPattern method.
// 2. A Nest application as docs/nestjs.md shows it: InboxkitModule, a binding whose `transport` is
//    `natsConsumer({ …, handler })` from `@inboxkit/nats`, effects written through @InboxTx() — applied once, a
//    redelivered duplicate skipped, a failing handler retried then dead-lettered to the NATS DLQ with its reason,
//    and app.close() draining a running handler before the consumer stops.

import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Controller, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, Payload } from '@nestjs/microservices';
import type { OutcomeEvent } from '@inboxkit/core';
import { describeTransportConformance } from '@inboxkit/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { NATS_FEATURES, natsConsumer } from '../../nats/src/index.js';
import { natsHarness, testNatsConnection, type NatsHarness } from '../../nats/test/nats-harness.js';
import { Inboxkit } from '../src/index.js';
import { InboxContext, InboxCtx, InboxkitTransport, InboxTx } from '../src/transport/index.js';
import { nestTransportHarness } from './support/nest-transport-harness.js';
import {
  openNestTestDatabase,
  testInboxkitModule,
  type NestTestDatabase,
  type NestTestDB,
} from './support/nest-database.js';
import { eventually as poll } from '../../../test/support/eventually.js';

describeTransportConformance(
  'nats through InboxkitTransport',
  NATS_FEATURES,
  async () => nestTransportHarness(await natsHarness()),
  // Above the harness's 2 s ack wait, so an unsettled message has time to come back.
  { quietPeriodMs: 3_000 },
);

/** Waits (generously: the machine is shared) for a state, never for a time. */
const eventually = (check: () => boolean | Promise<boolean>): Promise<void> =>
  poll(async () => check(), 60_000);

const Order = z.object({ amount: z.number(), kind: z.enum(['ok', 'fail', 'hold']).default('ok') });
type Order = z.infer<typeof Order>;

/** Handler runs by message id. */
const runs = new Map<string, number>();
/** Releases the handler of a `hold` order (the drain check). */
let release: () => void = () => undefined;
const held = new Promise<void>((resolve) => {
  release = resolve;
});
let holding = false;

@Controller()
class OrdersController {
  @EventPattern<string>('orders.placed')
  async placed(
    @Payload() order: Order,
    @InboxTx() tx: Transaction<NestTestDB>,
    @InboxCtx() ctx: InboxContext,
  ): Promise<void> {
    runs.set(ctx.message.id, (runs.get(ctx.message.id) ?? 0) + 1);
    if (order.kind === 'fail') throw new Error(`order ${order.amount} cannot be placed yet`);
    await tx.insertInto('effects').values({ consumer: ctx.consumer, message_id: ctx.message.id }).execute();
    if (order.kind === 'hold') {
      holding = true;
      await held;
    }
  }
}

let database: NestTestDatabase;
let nats: NatsHarness;
let own: NatsConnection;
let app: INestApplication | undefined;
const outcomes: OutcomeEvent[] = [];

const outcomeOf = (id: string): OutcomeEvent['outcome'][] =>
  outcomes.filter((e) => e.message.id === id).map((e) => e.outcome);

beforeAll(async () => {
  database = await openNestTestDatabase('nest_nats');
  nats = await natsHarness();
  own = await testNatsConnection();
  @Module({
    imports: [testInboxkitModule(database, outcomes)],
    controllers: [OrdersController],
  })
  class AppModule {}
  app = await NestFactory.create(AppModule, { logger: false });
  app.connectMicroservice(
    {
      strategy: new InboxkitTransport({
        inboxkit: app.get(Inboxkit),
        consumers: [
          {
            pattern: 'orders.placed',
            schema: Order,
            // As docs/nestjs.md shows it: the NATS transport's public factory, nothing Nest-specific.
            transport: (handler) =>
              natsConsumer({
                connection: own,
                stream: nats.stream,
                consumer: nats.durable,
                deadLetterSubject: nats.deadLetterSubject,
                ackWaitMs: 2_000,
                handler,
              }),
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
  release();
  await app?.close();
  await own?.close();
  await nats?.dispose();
  await database?.close();
});

const body = (value: unknown): string => JSON.stringify(value);

describe('InboxkitTransport over NATS JetStream (natsConsumer)', () => {
  it('applies each message once through @InboxTx(): a redelivered duplicate is skipped, not applied again', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await nats.publish([
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
  });

  it('retries a failing handler, then dead-letters it to the NATS DLQ with its reason and error', async () => {
    const id = randomUUID();
    await nats.publish([{ id, body: body({ amount: 3, kind: 'fail' }) }]);
    const [letter] = await nats.readDeadLetters(1, 60_000);
    expect(letter?.id).toBe(id);
    expect(letter?.headers['x-inboxkit-reason']).toBe('max-attempts');
    expect(letter?.headers['x-inboxkit-attempts']).toBe('3');
    expect(letter?.headers['x-inboxkit-error-message']).toContain('order 3 cannot be placed yet');
    expect(outcomeOf(id).map((o) => o.status)).toEqual(['retry', 'retry', 'dead-letter']);
    expect(runs.get(id)).toBe(3);
    expect(await database.effects(id)).toBe(0);
  });

  it('drains on shutdown: app.close() lets a running handler commit and ack before the consumer stops', async () => {
    const id = randomUUID();
    await nats.publish([{ id, body: body({ amount: 4, kind: 'hold' }) }]);
    await eventually(() => holding);
    const inboxkit = app!.get(Inboxkit);
    let closed = false;
    const closing = app!.close().then(() => {
      closed = true;
    });
    // The strategy is stopping and close() still waits for the handler, which holds its transaction open.
    await eventually(async () => (await inboxkit.health()).transports[0]?.state === 'stopping');
    expect(closed).toBe(false);
    release();
    await closing;
    app = undefined;
    expect(outcomeOf(id).map((o) => o.status)).toEqual(['processed']);
    expect(await database.effects(id)).toBe(1);
    // Acked: the durable has nothing pending nor unacknowledged, so no other process would get it again.
    const info = await (await jetstreamManager(nats.connection)).consumers.info(nats.stream, nats.durable);
    expect(info.num_ack_pending).toBe(0);
    expect(info.num_pending).toBe(0);
  });
});
