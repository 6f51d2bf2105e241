// The demo on SQS (ElasticMQ locally): a fresh queue and DLQ per run with a redrive policy above maxAttempts,
// and @inboxkit/sqs's consumer, publisher and DLQ reader.

import { DeleteQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { DeadLetterQueueReader, IdempotentConsumer, Publisher, TransportConsumer } from '@inboxkit/core';
import { createQueues, sqsConsumer, sqsDeadLetterQueue, sqsPublisher } from '@inboxkit/sqs';
import type { CreatedQueues } from '@inboxkit/sqs';
import { uniqueName } from '@inboxkit/testing';

import type { DeliveryCounts, DemoCrashSeam, DemoTransport } from '../demo-transport.js';
import { FaultInjector } from '../fault-injector.js';
import { COPY_HEADER } from '../story.js';
import type { StoryMessage } from '../story.js';

/** Where the SQS API is. */
export interface SqsSettings {
  readonly endpoint: string;
  readonly region: string;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

export class SqsDemoTransport implements DemoTransport {
  readonly name = 'sqs' as const;
  readonly label: readonly string[];
  readonly replayTransport = 'sqs';
  readonly publisher: Publisher;
  readonly #client: SQSClient;
  readonly #queues: CreatedQueues;
  readonly #faults = new FaultInjector();
  #running: TransportConsumer | undefined;

  private constructor(client: SQSClient, queues: CreatedQueues, endpoint: string) {
    this.#client = client;
    this.#queues = queues;
    this.publisher = sqsPublisher({ client });
    const name = queues.queueUrl.split('/').pop();
    this.label = [
      `SQS at ${endpoint}: sqsConsumer, sqsPublisher, sqsDeadLetterQueue`,
      `queue ${name}, DLQ ${name}-dlq`,
    ];
  }

  /** Creates the run's queues. Rejects when the endpoint cannot be reached. */
  static async open(settings: SqsSettings): Promise<SqsDemoTransport> {
    const client = new SQSClient({
      endpoint: settings.endpoint,
      region: settings.region,
      credentials: { ...settings.credentials },
      maxAttempts: 3,
    });
    try {
      const queues = await createQueues({ client, name: uniqueName('demo-payments'), maxAttempts: 5 });
      return new SqsDemoTransport(client, queues, settings.endpoint);
    } catch (error) {
      client.destroy();
      throw error;
    }
  }

  async startConsumer<P, Tx>(consumer: IdempotentConsumer<P, Tx>): Promise<void> {
    const transport = sqsConsumer({
      client: this.#client,
      queueUrl: this.#queues.queueUrl,
      deadLetterQueueUrl: this.#queues.deadLetterQueueUrl,
      handler: this.#faults.wrap(consumer),
      concurrency: 4,
      // A short poll so stop() returns quickly; production keeps 20 s.
      waitTimeSeconds: 1,
    });
    await transport.start();
    this.#running = transport;
  }

  async stopConsumer(): Promise<void> {
    const running = this.#running;
    this.#running = undefined;
    await running?.stop();
  }

  async publish(messages: readonly StoryMessage[]): Promise<void> {
    this.#faults.sent(messages);
    await this.publisher.publish(
      messages.map((m) => ({
        destination: this.#queues.queueUrl,
        id: m.id,
        body: m.body,
        headers: { [COPY_HEADER]: String(m.copy) },
      })),
    );
  }

  injectCrash(seam: DemoCrashSeam, id: string): void {
    this.#faults.arm(seam, id);
  }

  async settle(deadLetters: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    await this.#faults.whenAllFinal(timeoutMs);
    while ((await this.deadLetterCount()) < deadLetters) {
      if (Date.now() > deadline)
        throw new Error(`timed out waiting for ${deadLetters} dead letters in the DLQ`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  deliveryCounts(): DeliveryCounts {
    return this.#faults.counts();
  }

  async deadLetterCount(): Promise<number> {
    const { Attributes } = await this.#client.send(
      new GetQueueAttributesCommand({
        QueueUrl: this.#queues.deadLetterQueueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    return (
      Number(Attributes?.ApproximateNumberOfMessages ?? 0) +
      Number(Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
    );
  }

  deadLetterReader(): DeadLetterQueueReader {
    return sqsDeadLetterQueue({
      client: this.#client,
      queueUrl: this.#queues.deadLetterQueueUrl,
      waitTimeSeconds: 1,
    });
  }

  async close(): Promise<void> {
    await this.stopConsumer().catch(() => undefined);
    for (const url of [this.#queues.queueUrl, this.#queues.deadLetterQueueUrl]) {
      await this.#client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
    }
    this.#client.destroy();
  }
}
