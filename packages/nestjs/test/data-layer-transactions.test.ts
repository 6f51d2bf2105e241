// Prisma and TypeORM transactions inside Nest handlers: InboxkitModule over each library's seam, an
// @EventPattern handler writing through @InboxTx() (the library's own transaction object) and an @Idempotent()
// route writing through ctx.transaction(). A handler that writes and then fails rolls its write back with the
// inbox's transaction: after the retry there is one effect, not two.

import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { Body, Controller, Module, Post, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPattern, Payload } from '@nestjs/microservices';
import { rabbitmqConsumer } from '@inboxkit/rabbitmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Idempotent,
  IdempotencyCtx,
  Inboxkit,
  InboxkitModule,
  type IdempotentRouteContext,
} from '../src/index.js';
import { InboxContext, InboxCtx, InboxkitTransport, InboxTx } from '../src/transport/index.js';
import { openAdapter, type AdapterUnderTest } from '../../data/test/fixtures/adapters.js';
import { rabbitmqHarness, type RabbitmqHarness } from '../../rabbitmq/test/rabbitmq-harness.js';
import { amqpUrl } from '../../rabbitmq/test/amqp-service.js';
import { eventually } from '../../../test/support/eventually.js';
import { requireService } from '../../../test/support/services.js';
import { openNestTestDatabase, type NestTestDatabase } from './support/nest-database.js';

/** The adapter of the application being booted (the controllers are static; the library is not). */
let adapter: AdapterUnderTest<object>;

@Controller()
class EffectsController {
  @EventPattern<string>('effects')
  async apply(
    @Payload() body: { failAfterWrite?: boolean },
    @InboxTx() tx: object,
    @InboxCtx() ctx: InboxContext,
  ): Promise<void> {
    await adapter.applyEffect(tx, ctx.consumer, ctx.message.id);
    if (body.failAfterWrite === true && ctx.attempt === 1) throw new Error('failed after the write');
  }

  @Post('effects')
  @Idempotent()
  create(@Body() _body: unknown, @IdempotencyCtx() ctx: IdempotentRouteContext<object>): Promise<unknown> {
    return ctx.transaction(async (tx) => {
      await adapter.applyEffect(tx, 'http', `http:${ctx.key}`);
      return { ok: true };
    });
  }
}

for (const library of ['prisma', 'typeorm'] as const) {
  describe(`${library} transactions in Nest handlers`, () => {
    let database: NestTestDatabase;
    let harness: RabbitmqHarness;
    let app: INestApplication;
    let url: string;

    beforeAll(async () => {
      database = await openNestTestDatabase(`nest_${library}`);
      harness = await rabbitmqHarness();
      adapter = await openAdapter(library, { url: requireService('postgres').url, schema: database.schema });
      @Module({
        imports: [
          InboxkitModule.forRoot({
            seam: adapter.seam,
            inbox: { schema: database.schema },
            consumerDefaults: { backoff: { initialDelayMs: 100, jitter: 'none' } },
            idempotency: { schema: database.schema, principal: () => 'alice' },
            logger: { debug() {}, info() {}, warn() {}, error() {} },
          }),
        ],
        controllers: [EffectsController],
      })
      class AppModule {}
      app = await NestFactory.create(AppModule, { logger: false });
      app.connectMicroservice(
        {
          strategy: new InboxkitTransport({
            inboxkit: app.get(Inboxkit),
            consumers: [
              {
                pattern: 'effects',
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
      await app.listen(0, '127.0.0.1');
      url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    });

    afterAll(async () => {
      await app?.close();
      await adapter?.close();
      await harness?.dispose();
      await database?.close();
    });

    it('commits the effect written through @InboxTx() with the inbox record, once per message id', async () => {
      const id = randomUUID();
      await harness.publish([
        { id, body: JSON.stringify({}) },
        { id, body: JSON.stringify({}) },
      ]);
      await eventually(
        async () => (await harness.messageCount(harness.queue)) === 0 && (await database.effects(id)) === 1,
        60_000,
      );
      expect(await database.effects(id)).toBe(1);
    });

    it("rolls a failed attempt's write back with the inbox transaction: one effect after the retry", async () => {
      const id = randomUUID();
      await harness.publish([{ id, body: JSON.stringify({ failAfterWrite: true }) }]);
      await eventually(async () => {
        const { rows } = await database.pool.query<{ status: string }>(
          `SELECT status FROM "${database.schema}".inbox WHERE message_id = $1`,
          [id],
        );
        return rows[0]?.status === 'completed';
      }, 60_000);
      expect(await database.effects(id)).toBe(1);
    });

    it('commits an @Idempotent() route write through ctx.transaction() once per key', async () => {
      const key = randomUUID();
      const post = () =>
        fetch(`${url}/effects`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key },
          body: '{}',
        });
      expect((await post()).status).toBe(201);
      expect((await post()).status).toBe(201);
      expect(await database.effects(`http:${key}`)).toBe(1);
    });
  });
}
