// The demo on SQS (ElasticMQ locally): a fresh queue and DLQ per run with a redrive policy above maxAttempts,
// and @inboxkit/sqs's consumer, publisher and DLQ reader.

import { DeleteQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { DeadLetterQueueReader, IdempotentConsumer, Publisher, TransportConsumer } from '@inboxkit/core';
import { createQueues, sqsConsumer, sqsDeadLetterQueue, sqsPublisher } from '@inboxkit/sqs';
import type { CreatedQueues } from '@inboxkit/sqs';
import { uniqueName } from '@inboxkit/testing';

import { BrokerDemoTransport } from './broker-demo-transport.js';
import { COPY_HEADER } from '../story.js';
import type { StoryMessage } from '../story.js';

/** Where the SQS API is. */
export interface SqsSettings {
  readonly endpoint: string;
  readonly region: string;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

export class SqsDemoTransport extends BrokerDemoTransport {
  readonly name = 'sqs' as const;
  readonly label: readonly string[];
  readonly replayTransport = 'sqs';
  readonly publisher: Publisher;
  protected readonly deadLetterPlace = 'the DLQ';
  readonly #client: SQSClient;
  readonly #queues: CreatedQueues;

  private constructor(client: SQSClient, queues: CreatedQueues, endpoint: string) {
    super();
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

  protected transportConsumer<P, Tx>(handler: IdempotentConsumer<P, Tx>): TransportConsumer {
    return sqsConsumer({
      client: this.#client,
      queueUrl: this.#queues.queueUrl,
      deadLetterQueueUrl: this.#queues.deadLetterQueueUrl,
      handler,
      concurrency: 4,
      // A short poll so stop() returns quickly; production keeps 20 s.
      waitTimeSeconds: 1,
    });
  }

  protected async send(messages: readonly StoryMessage[]): Promise<void> {
    await this.publisher.publish(
      messages.map((m) => ({
        destination: this.#queues.queueUrl,
        id: m.id,
        body: m.body,
        headers: { [COPY_HEADER]: String(m.copy) },
      })),
    );
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
