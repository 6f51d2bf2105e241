// The replay suite's SQS (ElasticMQ): a standard queue and its DLQ made by the transport's createQueues
// (redrive policy above maxAttempts), an sqsConsumer feeding the core consumer.

import { DeleteQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import { createQueues, sqsConsumer, sqsDeadLetterQueue, sqsPublisher } from '@inboxkit/sqs';
import { uniqueName } from '@inboxkit/testing';

import type { ReplayFixture } from './replay-fixture.js';
import { requireService } from './services.js';

/** A fresh queue pair on the test SQS server. */
export async function sqsFixture(): Promise<ReplayFixture> {
  const endpoint = requireService('SQS_ENDPOINT');
  const client = new SQSClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'inboxkit', secretAccessKey: 'inboxkit' },
  });
  const queues = await createQueues({
    client,
    name: uniqueName('cli-sqs'),
    maxAttempts: 3,
    visibilityTimeoutSeconds: 30,
  });
  const publisher = sqsPublisher({ client });
  let consumer: TransportConsumer | undefined;

  const depth = async (queueUrl: string): Promise<{ visible: number; inFlight: number; delayed: number }> => {
    const { Attributes: a = {} } = await client.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    return {
      visible: Number(a.ApproximateNumberOfMessages ?? 0),
      inFlight: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
      delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
    };
  };

  return {
    transport: 'sqs',
    dlq: queues.deadLetterQueueUrl,
    cliArgs: ['--sqs-endpoint', endpoint, '--region', 'us-east-1'],
    async start(handler: IdempotentConsumer<unknown, unknown>) {
      consumer = sqsConsumer({
        client,
        queueUrl: queues.queueUrl,
        deadLetterQueueUrl: queues.deadLetterQueueUrl,
        handler,
        waitTimeSeconds: 1,
        concurrency: 4,
      });
      await consumer.start();
    },
    async stop() {
      await consumer?.stop();
      consumer = undefined;
    },
    async publish(messages) {
      await publisher.publish(
        messages.map((m) => ({ destination: queues.queueUrl, id: m.id, body: m.body })),
      );
    },
    async deadLetters() {
      const reader = sqsDeadLetterQueue({ client, queueUrl: queues.deadLetterQueueUrl, waitTimeSeconds: 0 });
      const out: DeadLetterEntry[] = [];
      for await (const entry of reader.browse({ limit: 100_000 })) out.push(entry);
      return out;
    },
    async restore(entries) {
      await publisher.publish(
        entries.map((e) => ({
          destination: queues.deadLetterQueueUrl,
          id: e.id!,
          body: typeof e.body === 'string' ? e.body : Buffer.from(e.body ?? '').toString('utf8'),
          headers: e.headers,
        })),
      );
    },
    async dlqDepth() {
      const d = await depth(queues.deadLetterQueueUrl);
      return d.visible + d.inFlight + d.delayed;
    },
    async sourceState() {
      const d = await depth(queues.queueUrl);
      return `visible=${d.visible} inFlight=${d.inFlight} delayed=${d.delayed}`;
    },
    async dispose() {
      await consumer?.stop().catch(() => undefined);
      for (const url of [queues.queueUrl, queues.deadLetterQueueUrl])
        await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
      client.destroy();
    },
  };
}
