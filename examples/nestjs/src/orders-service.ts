// Builds and starts the service: one Nest application serving HTTP and consuming RabbitMQ through
// InboxkitTransport, both on the same inbox over node-postgres (pgSeam).

import 'reflect-metadata';
import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { migrateInbox } from '@inboxkit/core/postgres';
import { pgSeam } from '@inboxkit/data/pg';
import { migrateIdempotencyKeys } from '@inboxkit/http';
import { Inboxkit, InboxkitModule } from '@inboxkit/nestjs';
import { InboxkitTransport } from '@inboxkit/nestjs/transport';
import { rabbitmqConsumer } from '@inboxkit/rabbitmq';
import amqp from 'amqplib';
import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import { OrderPlaced, OrdersController } from './orders.controller.js';
import { PaymentsController } from './payments.controller.js';

export interface ServiceOptions {
  /** The application's pool; its search_path names `schema`. Never ended here. */
  readonly pool: pg.Pool;
  readonly schema: string;
  readonly amqpUrl: string;
  readonly queue: string;
  /** HTTP port. Default is 3000; 0 picks a free one. */
  readonly port?: number;
}

/** Creates the tables (inbox, keys, orders, payments), then starts HTTP and the consumer. */
export async function startService(options: ServiceOptions): Promise<{ app: INestApplication; url: string }> {
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: options.pool }) });
  await migrateInbox(db, { schema: options.schema });
  await migrateIdempotencyKeys(db, { schema: options.schema });
  await options.pool.query(`
    CREATE TABLE IF NOT EXISTS "${options.schema}".orders (order_id text NOT NULL, total_cents int NOT NULL, message_id text NOT NULL);
    CREATE TABLE IF NOT EXISTS "${options.schema}".payments (id bigserial PRIMARY KEY, amount_cents int NOT NULL);`);

  @Module({
    imports: [
      InboxkitModule.forRoot({
        seam: pgSeam(options.pool),
        inbox: { schema: options.schema },
        consumerDefaults: { maxAttempts: 5 },
        // A real service reads the principal from its authentication guard (request.native.user).
        idempotency: {
          schema: options.schema,
          principal: (request) =>
            ((request.native as { headers: Record<string, unknown> }).headers['x-customer'] as
              string | undefined) ?? null,
        },
      }),
    ],
    controllers: [OrdersController, PaymentsController],
  })
  class AppModule {}

  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  app.connectMicroservice(
    {
      strategy: new InboxkitTransport({
        inboxkit: app.get(Inboxkit),
        consumers: [
          {
            pattern: 'orders.placed',
            schema: OrderPlaced,
            transport: (handler) =>
              rabbitmqConsumer({
                connect: () => amqp.connect(options.amqpUrl),
                queue: options.queue,
                handler,
              }),
          },
        ],
      }),
    },
    { inheritAppConfig: true },
  );
  await app.startAllMicroservices();
  await app.listen(options.port ?? 3000, '127.0.0.1');
  return { app, url: (await app.getUrl()).replace('[::1]', '127.0.0.1') };
}
