// The SQS side of a torture run (ElasticMQ): a standard queue and its DLQ wired by the transport's
// createQueues (redrive above maxAttempts), batched sends, visible + in-flight messages as the backlog, the DLQ
// read with the transport's own reader, and a broker outage through a TCP proxy (see tcp-proxy.ts for why not
// a restart).

import {
  GetQueueAttributesCommand,
  DeleteQueueCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { HEADERS } from '@inboxkit/core';
import { createQueues, sqsDeadLetterQueue } from '@inboxkit/sqs';
import { uniqueName } from '@inboxkit/testing';

import { requireService } from '../../support/services.js';
import type { PlannedMessage } from '../message-plan.js';
import { TcpProxy } from './tcp-proxy.js';
import type { DeadLetterCopy, TransportRig } from './transport-rig.js';
import { retrying } from './transport-rig.js';

const VISIBILITY_SECONDS = 5;
const OUTAGE_MS = 8_000;

export function sqsRig(options: { readonly maxAttempts: number }): TransportRig {
  const service = requireService('sqs');
  const endpoint = new URL(service.endpoint);
  const client = new SQSClient({
    endpoint: service.endpoint,
    region: service.region,
    credentials: service.credentials,
  });
  const proxy = new TcpProxy({ host: endpoint.hostname, port: Number(endpoint.port) });
  const name = uniqueName('torture');
  let queueUrl = '';
  let deadLetterQueueUrl = '';
  let resent = 0;

  /** The queue URL as the consumers reach it: through the proxy. */
  function viaProxy(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(proxy.port);
    return u.toString();
  }

  return {
    name: 'sqs',
    restartLabel: 'SQS outage (proxy)',
    get resent() {
      return resent;
    },
    async setup() {
      await proxy.listen();
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
          endpoint: `http://127.0.0.1:${proxy.port}`,
          queueUrl: viaProxy(queueUrl),
          deadLetterQueueUrl: viaProxy(deadLetterQueueUrl),
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
      await proxy.outage(OUTAGE_MS);
      return `sqs: every consumer connection reset and refused for ${OUTAGE_MS / 1000} s (ElasticMQ is in-memory here: a restart would delete the queues)`;
    },
    async teardown() {
      await proxy.close();
      for (const url of [queueUrl, deadLetterQueueUrl]) {
        if (url !== '') await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
      }
      client.destroy();
    },
  };
}
