// The payments service in production shape: migrations, the inbox store on the application's Kysely, the
// consumer, the Kafka transport, the pruner, the reconciliation of the provider's charges, and a stop() that
// drains in order. main.ts wires it to the environment and to SIGTERM; the tests start it against the real
// broker.

import type { Logger, OutcomeEvent } from '@inboxkit/core';
import { startPruner } from '@inboxkit/core';
import { migrateReconciliation, startReconciliation } from '@inboxkit/core/patterns';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { kafkaConsumer } from '@inboxkit/kafka';
import type { Kafka } from 'kafkajs';
import type { Kysely } from 'kysely';

import { createPaymentsTable, paymentsConsumer } from './payments-consumer.js';
import type { PaymentsConsumerOptions, PaymentsDatabase } from './payments-consumer.js';
import { paymentsReconciler } from './payments-reconciler.js';

/** Options of `startPaymentsService`. */
export interface PaymentsServiceOptions {
  /** The application's Kysely instance; the service never destroys it. */
  readonly db: Kysely<PaymentsDatabase>;
  /** Schema of the inbox tables. Default is `inboxkit`. */
  readonly inboxSchema?: string;
  readonly kafka: Kafka;
  readonly topic: string;
  readonly groupId: string;
  readonly providerUrl: string;
  /** kafkajs consumer settings (group timings). Default is kafkajs's. */
  readonly consumerConfig?: {
    readonly sessionTimeout?: number;
    readonly heartbeatInterval?: number;
    readonly rebalanceTimeout?: number;
    readonly maxWaitTimeInMs?: number;
  };
  /** Consumer tuning passed through (lease, timeouts, backoff, key). */
  readonly consumer?: Omit<PaymentsConsumerOptions, 'store' | 'providerUrl' | 'logger' | 'onOutcome'>;
  /** Time between reconciliation sweeps of the provider's charges (payments-reconciler.ts). Default is 300,000 ms. */
  readonly reconcileIntervalMs?: number;
  readonly logger?: Logger;
  readonly onOutcome?: (event: OutcomeEvent) => void | Promise<void>;
}

/** A running service. */
export interface PaymentsService {
  readonly store: PostgresInboxStore<PaymentsDatabase>;
  /** Stops consuming (in-flight payments finish and are committed), then the pruner. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Migrates, then starts consuming `topic` (its DLQ is `<topic>.dlq`, which must exist or be auto-created).
 *
 * @example
 * const service = await startPaymentsService({ db, kafka, topic: 'payments', groupId: 'payments', providerUrl });
 * process.once('SIGTERM', () => void service.stop());
 */
export async function startPaymentsService(options: PaymentsServiceOptions): Promise<PaymentsService> {
  const inboxSchema = options.inboxSchema ?? 'inboxkit';
  await migrateInbox(options.db, { schema: inboxSchema });
  await createPaymentsTable(options.db);
  await migrateReconciliation(options.db, { schema: inboxSchema });
  const store = new PostgresInboxStore<PaymentsDatabase>({ db: options.db, schema: inboxSchema });
  const consumer = paymentsConsumer({
    ...options.consumer,
    store,
    providerUrl: options.providerUrl,
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.onOutcome !== undefined ? { onOutcome: options.onOutcome } : {}),
  });
  const kafkaClientConsumer = options.kafka.consumer({ groupId: options.groupId, ...options.consumerConfig });
  const transport = kafkaConsumer({
    consumer: kafkaClientConsumer,
    kafka: options.kafka,
    topics: [options.topic],
    handler: consumer,
    fromBeginning: true,
    ...(options.consumerConfig?.heartbeatInterval !== undefined
      ? { heartbeatIntervalMs: options.consumerConfig.heartbeatInterval }
      : {}),
  });
  await transport.start();
  // Completed rows older than the dedupe window (7 days) are deleted in batches, one runner at a time.
  const pruner = startPruner(store, { ...(options.logger !== undefined ? { logger: options.logger } : {}) });
  // The provider's charges against the payments table: orphan charges recorded, double charges flagged.
  const reconciliation = startReconciliation(
    paymentsReconciler({
      db: options.db,
      providerUrl: options.providerUrl,
      schema: inboxSchema,
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
    }),
    {
      intervalMs: options.reconcileIntervalMs ?? 300_000,
      ...(options.logger !== undefined ? { logger: options.logger } : {}),
    },
  );
  let stopping: Promise<void> | undefined;
  return {
    store,
    stop: () =>
      (stopping ??= (async () => {
        await transport.stop();
        await kafkaClientConsumer.disconnect();
        await pruner.stop();
        await reconciliation.stop();
      })()),
  };
}
