// The orders service in production shape: migrations, the inbox store on the application's Kysely, the
// consumer on a RabbitMQ quorum queue (with its delay queues and DLQ declared by the transport), the pruner,
// and a stop() that drains the consumer first. main.ts wires it to the environment and SIGTERM.

import type { Logger, OutcomeEvent, TransportConsumer } from '@inboxkit/core';
import { startPruner } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { rabbitmqConsumer } from '@inboxkit/rabbitmq';
import type { AmqpConnection, RabbitmqTopologySettings } from '@inboxkit/rabbitmq';
import type { Kysely } from 'kysely';

import { createOrdersTables, ordersConsumer } from './orders-consumer.js';
import type { OrdersConsumerOptions, OrdersDatabase } from './orders-consumer.js';

/** Options of `startOrdersService`. */
export interface OrdersServiceOptions {
  /** The application's Kysely instance; the service never destroys it. */
  readonly db: Kysely<OrdersDatabase>;
  /** Schema of the inbox tables. Default is `inboxkit`. */
  readonly inboxSchema?: string;
  /** Opens a connection; called again after the connection is lost. */
  readonly connect: () => Promise<AmqpConnection>;
  readonly queue: string;
  /** Orders handled at once. Default is 8. */
  readonly concurrency?: number;
  readonly topology?: RabbitmqTopologySettings;
  readonly reconnect?: { readonly initialDelayMs?: number; readonly maxDelayMs?: number };
  readonly consumer?: Omit<OrdersConsumerOptions, 'store' | 'logger' | 'onOutcome'>;
  readonly logger?: Logger;
  readonly onOutcome?: (event: OutcomeEvent) => void | Promise<void>;
}

/** A running service. */
export interface OrdersService {
  readonly store: PostgresInboxStore<OrdersDatabase>;
  readonly transport: TransportConsumer;
  /** Stops consuming (running handlers finish and are acked), then the pruner. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Migrates, then consumes `queue`.
 *
 * @example
 * const service = await startOrdersService({ db, connect: () => amqp.connect(url), queue: 'orders' });
 * process.once('SIGTERM', () => void service.stop());
 */
export async function startOrdersService(options: OrdersServiceOptions): Promise<OrdersService> {
  const inboxSchema = options.inboxSchema ?? 'inboxkit';
  await migrateInbox(options.db, { schema: inboxSchema });
  await createOrdersTables(options.db);
  const store = new PostgresInboxStore<OrdersDatabase>({ db: options.db, schema: inboxSchema });
  const consumer = ordersConsumer({
    ...options.consumer,
    store,
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.onOutcome !== undefined ? { onOutcome: options.onOutcome } : {}),
  });
  const transport = rabbitmqConsumer({
    connect: options.connect,
    queue: options.queue,
    handler: consumer,
    concurrency: options.concurrency ?? 8,
    ...(options.topology !== undefined ? { topology: options.topology } : {}),
    ...(options.reconnect !== undefined ? { reconnect: options.reconnect } : {}),
  });
  await transport.start();
  const pruner = startPruner(store, options.logger !== undefined ? { logger: options.logger } : {});
  let stopping: Promise<void> | undefined;
  return {
    store,
    transport,
    stop: () =>
      (stopping ??= (async () => {
        await transport.stop();
        await pruner.stop();
      })()),
  };
}
