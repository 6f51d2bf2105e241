// Request-scoped providers in an @EventPattern handler run by InboxkitTransport: Nest builds them per message,
// and the one that injects CONTEXT sees that message's payload and its InboxContext (the same transaction).

import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { Controller, Inject, Injectable, Module, Scope, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CONTEXT, EventPattern, type RequestContext } from '@nestjs/microservices';
import { kyselySeam } from '@inboxkit/core/postgres';
import { rabbitmqConsumer } from '@inboxkit/rabbitmq';
import type { Transaction } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Inboxkit, InboxkitModule } from '../src/index.js';
import { InboxContext, InboxCtx, InboxkitTransport, InboxTx } from '../src/transport/index.js';
import { rabbitmqHarness, type RabbitmqHarness } from '../../rabbitmq/test/rabbitmq-harness.js';
import { amqpUrl } from '../../rabbitmq/test/amqp-service.js';
import { eventually } from '../../../test/support/eventually.js';
import { openNestTestDatabase, type NestTestDatabase, type NestTestDB } from './support/nest-database.js';

/** Every MessageScope Nest built, with what it saw. */
const scopes: { messageId: string; sameContext: boolean; payload: unknown; instance: MessageScope }[] = [];

@Injectable({ scope: Scope.REQUEST })
class MessageScope {
  constructor(@Inject(CONTEXT) readonly request: RequestContext<unknown, InboxContext>) {}
}

@Controller()
class ScopedController {
  constructor(@Inject(MessageScope) private readonly scope: MessageScope) {}

  @EventPattern<string>('scoped')
  async handle(@InboxTx() tx: Transaction<NestTestDB>, @InboxCtx() ctx: InboxContext): Promise<void> {
    const seen = this.scope.request.getContext();
    scopes.push({
      messageId: seen.message.id,
      sameContext: seen === ctx,
      payload: this.scope.request.getData(),
      instance: this.scope,
    });
    await tx.insertInto('effects').values({ consumer: ctx.consumer, message_id: seen.message.id }).execute();
  }
}

let database: NestTestDatabase;
let harness: RabbitmqHarness;
let app: INestApplication;

beforeAll(async () => {
  database = await openNestTestDatabase('nest_scoped');
  harness = await rabbitmqHarness();
  @Module({
    imports: [
      InboxkitModule.forRoot({
        seam: kyselySeam(database.db),
        inbox: { schema: database.schema },
        logger: { debug() {}, info() {}, warn() {}, error() {} },
      }),
    ],
    controllers: [ScopedController],
    providers: [MessageScope],
  })
  class AppModule {}
  app = await NestFactory.create(AppModule, { logger: false });
  app.connectMicroservice(
    {
      strategy: new InboxkitTransport({
        inboxkit: app.get(Inboxkit),
        consumers: [
          {
            pattern: 'scoped',
            transport: (handler) =>
              rabbitmqConsumer({
                connect: () => amqp.connect(amqpUrl()),
                queue: harness.queue,
                handler,
                topology: harness.topology,
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
  await app?.close();
  await harness?.dispose();
  await database?.close();
});

it('builds a request-scoped provider per message that sees its payload and InboxContext', async () => {
  const [a, b] = [randomUUID(), randomUUID()];
  await harness.publish([
    { id: a, body: JSON.stringify({ n: 1 }) },
    { id: b, body: JSON.stringify({ n: 2 }) },
  ]);
  await eventually(
    async () => (await database.effects(a)) === 1 && (await database.effects(b)) === 1,
    60_000,
  );
  expect(scopes.map((s) => s.messageId).sort()).toEqual([a, b].sort());
  expect(scopes.every((s) => s.sameContext)).toBe(true);
  expect(new Set(scopes.map((s) => s.instance)).size).toBe(2);
  expect(scopes.map((s) => s.payload)).toEqual(expect.arrayContaining([{ n: 1 }, { n: 2 }]));
});
