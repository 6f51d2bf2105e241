// The console's test world on the real services: a fresh inbox schema with an effects table, a RabbitMQ
// queue with its DLQ (or a Kafka topic with its `.dlq` topic, the console on one Kafka client), a real
// consumer (zod schema; some ids refused on purpose, some failing until they run out of attempts) and
// `inboxkit console` serving over them on a free port.

import { idempotentConsumer, PermanentError } from '@inboxkit/core';
import type { FingerprintInput, FingerprintResolver, IdempotentConsumer } from '@inboxkit/core';
import { OutcomeRecorder } from '@inboxkit/testing';
import { sql } from 'kysely';
import type { Transaction } from 'kysely';
import type { z } from 'zod';

import { startConsoleServer } from '../../src/console/console-server.js';
import type { ConsoleServer, ConsoleServerOptions } from '../../src/console/console-server.js';
import { resolveConnectionSettings } from '../../src/settings/connection-settings.js';
import type { KafkaClientName } from '../../src/settings/connection-settings.js';
import { defaultCliServices } from '../../src/transports/default-cli-services.js';
import { eventually } from './eventually.js';
import { inboxDatabase } from './inbox-database.js';
import type { InboxDatabase } from './inbox-database.js';
import { kafkaFixture } from './kafka-fixture.js';
import { Order, schemas } from './order-schemas.js';
import { rabbitmqFixture } from './rabbitmq-fixture.js';
import type { ReplayFixture } from './replay-fixture.js';
import { requireService } from './services.js';

export { Order };

/** The world one console test file works in. */
export interface ConsoleWorld {
  readonly database: InboxDatabase;
  readonly broker: ReplayFixture;
  readonly consumerName: string;
  /** The console's and the API's label of the DLQ: `transport:name`. */
  readonly dlqId: string;
  readonly recorder: OutcomeRecorder;
  /** Ids whose handler throws a PermanentError (dead-lettered at once as `permanent-error`). */
  readonly refused: Set<string>;
  /** Ids whose handler throws a plain Error (retried, then dead-lettered as `max-attempts`). */
  readonly flaky: Set<string>;
  /** Lines the console logged. */
  readonly log: string[];
  /** Starts a console over this world (port 0); closed by `dispose`. */
  console(options?: Partial<ConsoleServerOptions>): Promise<ConsoleServer>;
  /** Publishes orders and waits until `deadLetters` of them sit in the DLQ. */
  publish(orders: readonly { id: string; amountCents: number }[], deadLetters: number): Promise<void>;
  dispose(): Promise<void>;
}

/** Options of `consoleWorld`. */
export interface ConsoleWorldOptions {
  /** The consumer's `fingerprint` option. Default: none (the whole payload). */
  readonly fingerprint?: FingerprintResolver<FingerprintInput>;
  /** The broker: RabbitMQ, or Kafka with the CLI and the console on one client. Default: RabbitMQ. */
  readonly broker?: ConsoleBroker;
}

/** The broker a console world runs on. */
export type ConsoleBroker =
  { readonly transport: 'rabbitmq' } | { readonly transport: 'kafka'; readonly client: KafkaClientName };

/** The brokers the console and `dlq edit` are proved on: RabbitMQ, and Kafka on each client. */
export const CONSOLE_BROKERS: readonly (ConsoleBroker & { readonly label: string })[] = [
  { transport: 'rabbitmq', label: 'RabbitMQ' },
  { transport: 'kafka', client: 'kafkajs', label: 'Kafka (kafkajs)' },
  { transport: 'kafka', client: 'platformatic', label: 'Kafka (platformatic)' },
];

/** Builds the world: schema, queue, consumer (started). */
export async function consoleWorld(options: ConsoleWorldOptions = {}): Promise<ConsoleWorld> {
  const database = await inboxDatabase();
  const on = options.broker ?? { transport: 'rabbitmq' };
  const broker = on.transport === 'kafka' ? await kafkaFixture(on.client) : await rabbitmqFixture();
  const consumerName = 'orders';
  const recorder = new OutcomeRecorder();
  const refused = new Set<string>();
  const flaky = new Set<string>();
  const log: string[] = [];
  const consumer = idempotentConsumer<z.infer<typeof Order>, Transaction<unknown>>({
    name: consumerName,
    store: database.store,
    schema: Order,
    ...(options.fingerprint === undefined ? {} : { fingerprint: options.fingerprint }),
    maxAttempts: 3,
    backoff: { initialDelayMs: 20, maxDelayMs: 50 },
    handler: async (message, { tx }) => {
      if (refused.has(message.id)) throw new PermanentError(`order ${message.id} refused: card declined`);
      if (flaky.has(message.id)) throw new Error(`warehouse timeout for ${message.id} after 3000 ms`);
      await sql`insert into ${sql.table(`${database.schema}.effects`)} (message_id) values (${message.id})`.execute(
        tx,
      );
    },
    hooks: { onOutcome: recorder.hook },
  });
  await broker.start(consumer as IdempotentConsumer<unknown, unknown>);
  const servers: ConsoleServer[] = [];
  const connection = resolveConnectionSettings(
    {
      'database-url': requireService('DATABASE_URL'),
      schema: database.schema,
      ...(on.transport === 'kafka'
        ? { 'kafka-brokers': requireService('KAFKA_BROKERS'), 'kafka-client': on.client }
        : { 'amqp-url': requireService('AMQP_URL') }),
    },
    {},
  );
  return {
    database,
    broker,
    consumerName,
    dlqId: `${broker.transport}:${broker.dlq}`,
    recorder,
    refused,
    flaky,
    log,
    async console(options = {}) {
      const server = await startConsoleServer({
        port: 0,
        dlqs: [{ transport: on.transport, name: broker.dlq }],
        services: defaultCliServices({}, consumerName),
        connection,
        db: database.db,
        operator: 'console-test',
        sampleIntervalMs: 500,
        schemas,
        log: (line) => log.push(line),
        ...options,
      });
      servers.push(server);
      return server;
    },
    async publish(orders, deadLetters) {
      const before = await broker.dlqDepth();
      await broker.publish(
        orders.map((o) => ({
          id: o.id,
          body: JSON.stringify({ orderId: o.id, amountCents: o.amountCents }),
        })),
      );
      await eventually(
        async () => (await broker.dlqDepth()) === before + deadLetters,
        async () => `DLQ depth ${await broker.dlqDepth()}, expected ${before + deadLetters}`,
        60_000,
      );
    },
    async dispose() {
      for (const s of servers) await s.close().catch(() => undefined);
      await broker.dispose().catch(() => undefined);
      await database.dispose();
    },
  };
}
