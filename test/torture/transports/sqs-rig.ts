// The SQS side of a torture run (ElasticMQ): a standard queue and its DLQ wired by the transport's
// createQueues (redrive above maxAttempts), batched sends, visible + in-flight messages as the backlog, the DLQ
// read with the transport's own reader, and a real broker restart (services.sh restart elasticmq: ElasticMQ
// keeps its queues and messages in H2 there), checked to keep the queue's messages.

import {
  GetQueueAttributesCommand,
  DeleteQueueCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { HEADERS } from '@inboxkit/core';
import { createQueues, sqsDeadLetterQueue } from '@inboxkit/sqs';
import { uniqueName } from '@inboxkit/testing';

import { requireService, restartService } from '../../support/services.js';
import type { PlannedMessage } from '../message-plan.js';
import type { DeadLetterCopy, TransportRig } from './transport-rig.js';
import { retrying } from './transport-rig.js';

const VISIBILITY_SECONDS = 5;

export function sqsRig(options: { readonly maxAttempts: number }): TransportRig {
  const service = requireService('sqs');
  const client = new SQSClient({
    endpoint: service.endpoint,
    region: service.region,
    credentials: service.credentials,
  });
  const name = uniqueName('torture');
  let queueUrl = '';
  let deadLetterQueueUrl = '';
  let resent = 0;

  /** Messages in the queue: visible, in flight and delayed. */
  async function depth(): Promise<number> {
    const { Attributes = {} } = await client.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    return (
      Number(Attributes.ApproximateNumberOfMessages ?? 0) +
      Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0) +
      Number(Attributes.ApproximateNumberOfMessagesDelayed ?? 0)
    );
  }

  return {
    name: 'sqs',
    restartLabel: 'ElasticMQ restarted',
    get resent() {
      return resent;
    },
    async setup() {
      const created = await createQueues({
        client,
        name,
        maxAttempts: options.maxAttempts,
        visibilityTimeoutSeconds: VISIBILITY_SECONDS,
      });
      queueUrl = created.queueUrl;
      deadLetterQueueUrl = created.deadLetterQueueUrl;
    },
    consumerSettings() {
      return {
        sqs: {
          endpoint: service.endpoint,
          queueUrl,
          deadLetterQueueUrl,
          concurrency: 8,
          visibilityTimeoutSeconds: VISIBILITY_SECONDS,
        },
      };
    },
    async send(messages: readonly PlannedMessage[]) {
      for (let i = 0; i < messages.length; i += 10) {
        const entries = messages.slice(i, i + 10);
        let pending = entries.map((m, k) => ({ m, k }));
        let first = true;
        await retrying('sqs send', async () => {
          if (!first) resent += pending.length;
          first = false;
          const result = await client.send(
            new SendMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: pending.map(({ m, k }) => ({
                Id: String(k),
                MessageBody: m.body,
                MessageAttributes: { 'message-id': { DataType: 'String', StringValue: m.id } },
              })),
            }),
          );
          const failed = new Set((result.Failed ?? []).map((f) => f.Id));
          pending = pending.filter(({ k }) => failed.has(String(k)));
          if (pending.length > 0) throw new Error(`${pending.length} entries of a SendMessageBatch failed`);
        });
      }
    },
    async backlog() {
      try {
        return await depth();
      } catch {
        return undefined;
      }
    },
    async readDeadLetters() {
      const reader = sqsDeadLetterQueue({
        client,
        queueUrl: deadLetterQueueUrl,
        waitTimeSeconds: 1,
        visibilityTimeoutSeconds: 60,
      });
      const copies: DeadLetterCopy[] = [];
      try {
        for await (const entry of reader.browse({ limit: 1_000_000 }))
          copies.push({ id: entry.id, reason: entry.headers[HEADERS.reason] });
      } finally {
        await reader.close();
      }
      return copies;
    },
    async restartBroker() {
      // What the queue holds just before the restart must still be there after it (less what consumers deleted
      // while ElasticMQ was stopping): an in-memory ElasticMQ would come back without the queue at all.
      const before = await depth();
      await restartService('sqs', { timeoutMs: 240_000 });
      const after = await retrying('sqs queue depth after the restart', depth, 60_000);
      if (before >= 20 && after === 0)
        throw new Error(`ElasticMQ lost the queue's ${before} messages across its restart`);
      return `sqs: ElasticMQ restarted (services.sh restart elasticmq); the queue held ${before} messages before, ${after} after`;
    },
    async teardown() {
      for (const url of [queueUrl, deadLetterQueueUrl]) {
        if (url !== '') await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
      }
      client.destroy();
    },
  };
}
