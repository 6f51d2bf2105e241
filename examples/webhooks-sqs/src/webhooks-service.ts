// The webhooks service in production shape: migrations, the inbox store, the consumer on SQS with the event id
// read from the body (`messageIdBodyField: 'id'`), the pruner, and a stop() that drains first. The ingress
// (webhook-ingress.ts) usually runs in another process; main.ts runs both.

import type { Logger, OutcomeEvent } from '@inboxkit/core';
import { startPruner } from '@inboxkit/core';
import { migrateInbox, PostgresInboxStore } from '@inboxkit/core/postgres';
import { sqsConsumer } from '@inboxkit/sqs';
import type { SqsClient } from '@inboxkit/sqs';
import type { Kysely } from 'kysely';

import { createWebhookTables, webhooksConsumer } from './webhooks-consumer.js';
import type { WebhooksConsumerOptions, WebhooksDatabase } from './webhooks-consumer.js';

/** Options of `startWebhooksService`. */
export interface WebhooksServiceOptions {
  /** The application's Kysely instance; the service never destroys it. */
  readonly db: Kysely<WebhooksDatabase>;
  /** Schema of the inbox tables. Default is `inboxkit`. */
  readonly inboxSchema?: string;
  /** The application's SQSClient; never closed here. */
  readonly client: SqsClient;
  readonly queueUrl: string;
  readonly deadLetterQueueUrl: string;
  /** Long-poll wait in seconds. Default is 20 (SQS's longest). */
  readonly waitTimeSeconds?: number;
  readonly consumer?: Omit<WebhooksConsumerOptions, 'store' | 'logger' | 'onOutcome'>;
  readonly logger?: Logger;
  readonly onOutcome?: (event: OutcomeEvent) => void | Promise<void>;
}

/** A running service. */
export interface WebhooksService {
  readonly store: PostgresInboxStore<WebhooksDatabase>;
  /** Stops polling (running handlers finish and are deleted from the queue), then the pruner. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * Migrates, then consumes `queueUrl`. Give the queue a redrive policy to `deadLetterQueueUrl` above
 * `maxAttempts` (`createQueues` or `redrivePolicyFor` from @inboxkit/sqs).
 *
 * @example
 * const service = await startWebhooksService({ db, client, queueUrl, deadLetterQueueUrl });
 * process.once('SIGTERM', () => void service.stop());
 */
export async function startWebhooksService(options: WebhooksServiceOptions): Promise<WebhooksService> {
  const inboxSchema = options.inboxSchema ?? 'inboxkit';
  await migrateInbox(options.db, { schema: inboxSchema });
  await createWebhookTables(options.db);
  const store = new PostgresInboxStore<WebhooksDatabase>({ db: options.db, schema: inboxSchema });
  const consumer = webhooksConsumer({
    ...options.consumer,
    store,
    ...(options.logger !== undefined ? { logger: options.logger } : {}),
    ...(options.onOutcome !== undefined ? { onOutcome: options.onOutcome } : {}),
  });
  const transport = sqsConsumer({
    client: options.client,
    queueUrl: options.queueUrl,
    deadLetterQueueUrl: options.deadLetterQueueUrl,
    handler: consumer,
    // The provider's event id is the message id: the ingress sends the raw body, no attributes.
    messageIdBodyField: 'id',
    ...(options.waitTimeSeconds !== undefined ? { waitTimeSeconds: options.waitTimeSeconds } : {}),
  });
  await transport.start();
  const pruner = startPruner(store, options.logger !== undefined ? { logger: options.logger } : {});
  let stopping: Promise<void> | undefined;
  return {
    store,
    stop: () =>
      (stopping ??= (async () => {
        await transport.stop();
        await pruner.stop();
      })()),
  };
}
