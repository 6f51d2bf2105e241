// The TransportHarness of the SQS transport, over a fresh queue pair on the test SQS server (ElasticMQ). Short
// visibility timeouts keep the suite quick: an unsettled message is back within about two seconds.

import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { idempotentConsumer } from '@inboxkit/core';
import type { DeadLetterEntry, IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import type { HarnessConsumerOptions, HarnessMessage, TransportHarness } from '@inboxkit/testing';

import { encodeMessageAttributes, sqsConsumer, sqsDeadLetterQueue, sqsPublisher } from '../src/index.js';
import type { CreatedQueues, SqsClient, SqsConsumerOptions } from '../src/index.js';
import { deleteQueues, freshQueues, testSqsClient } from './support/sqs-test-client.js';
import { DEFAULT_MAX_SQS_MESSAGE_BYTES } from '../src/dead-letter-message.js';

/**
 * An SqsClient that can "die": after `kill()` every call rejects, and so does every call that was in flight
 * (its answer never reaches the dead process). Nothing is settled on the broker on the way down.
 */
export class KillableSqsClient {
  readonly #inner: SqsClient;
  #dead = false;

  constructor(inner: SqsClient) {
    this.#inner = inner;
  }

  kill(): void {
    this.#dead = true;
  }

  readonly send = (async (command: Parameters<SqsClient['send']>[0], options?: unknown) => {
    if (this.#dead) throw new Error('SQS connection lost: the process crashed');
    const result = await (this.#inner.send as (c: unknown, o?: unknown) => Promise<unknown>)(
      command,
      options,
    );
    if (this.#dead) throw new Error('SQS connection lost: the process crashed');
    return result;
  }) as SqsClient['send'];
}

/** Options of `sqsHarness`. */
export interface SqsHarnessOptions {
  /** Use a FIFO queue pair. Default is false. */
  readonly fifo?: boolean;
  /** Visibility timeout of the consumers, in seconds. Default is 2. */
  readonly visibilityTimeoutSeconds?: number;
  /** Extra options for every consumer the harness starts. */
  readonly consumer?: Partial<
    Omit<SqsConsumerOptions, 'client' | 'queueUrl' | 'deadLetterQueueUrl' | 'handler'>
  >;
}

/** A harness plus what tests beyond the conformance suite use. */
export interface SqsHarness extends TransportHarness {
  readonly client: SQSClient;
  readonly queues: CreatedQueues;
}

/**
 * The suite's consumers keep core's default handler timeout (30 s), which the transport's start-up check
 * rightly refuses next to a 2 s visibility timeout. Their handlers finish in milliseconds, so the harness runs
 * an equivalent consumer — same name, store, handler, schema and hooks, built by core from the same
 * configuration — whose handler timeout fits inside the visibility timeout.
 */
function fitHandlerTimeout<P, Tx>(
  consumer: IdempotentConsumer<P, Tx>,
  visibilityTimeoutSeconds: number,
): IdempotentConsumer<P, Tx> {
  const limitMs = visibilityTimeoutSeconds * 1000 - 500;
  if (consumer.config.handlerTimeoutMs < visibilityTimeoutSeconds * 1000) return consumer;
  return idempotentConsumer<P, Tx>({ ...consumer.config, handlerTimeoutMs: limitMs });
}

/**
 * Builds a harness over a new queue pair (redrive policy with headroom above any `maxAttempts` the suite
 * uses). `crash()` kills the clients of every consumer started so far: in-flight messages are neither deleted
 * nor made visible, and come back when their visibility timeout ends.
 *
 * @example
 * describeTransportConformance('sqs', SQS_FEATURES, () => sqsHarness(), { quietPeriodMs: 3_000 });
 */
export async function sqsHarness(options: SqsHarnessOptions = {}): Promise<SqsHarness> {
  const client = testSqsClient();
  const fifo = options.fifo ?? false;
  const visibilityTimeoutSeconds = options.visibilityTimeoutSeconds ?? 2;
  const queues = await freshQueues(client, fifo ? 'conformance-fifo' : 'conformance', {
    fifo,
    maxAttempts: 10,
    headroom: 40,
  });
  const publisher = sqsPublisher({ client });
  const running: { consumer: TransportConsumer; client: KillableSqsClient }[] = [];
  const crashed: Promise<void>[] = [];

  async function sendDirect(messages: readonly HarnessMessage[]): Promise<void> {
    // Messages without an id (missing-id tests) and FIFO copies that must not be deduplicated by SQS itself:
    // a producer's duplicate arrives after SQS's 5-minute deduplication window, or from another producer.
    for (let i = 0; i < messages.length; i += 10) {
      const entries = messages.slice(i, i + 10).map((m, n) => ({
        Id: String(n),
        MessageBody: typeof m.body === 'string' ? m.body : Buffer.from(m.body).toString('utf8'),
        MessageAttributes: encodeMessageAttributes({
          ...m.headers,
          ...(m.id !== undefined ? { 'message-id': m.id } : {}),
        }),
        ...(fifo
          ? {
              MessageGroupId: m.key ?? m.id ?? 'no-key',
              MessageDeduplicationId: `${i + n}-${Date.now()}-${Math.random()}`,
            }
          : {}),
      }));
      const result = await client.send(
        new SendMessageBatchCommand({ QueueUrl: queues.queueUrl, Entries: entries }),
      );
      if ((result.Failed ?? []).length > 0)
        throw new Error(`harness publish failed: ${JSON.stringify(result.Failed)}`);
    }
  }

  return {
    client,
    queues,

    async startConsumer(
      consumer: IdempotentConsumer<unknown, unknown>,
      consumerOptions: HarnessConsumerOptions = {},
    ) {
      const killable = new KillableSqsClient(client);
      const transport = sqsConsumer({
        waitTimeSeconds: 1,
        ...options.consumer,
        client: killable,
        queueUrl: queues.queueUrl,
        deadLetterQueueUrl: queues.deadLetterQueueUrl,
        handler: fitHandlerTimeout(consumer, visibilityTimeoutSeconds),
        visibilityTimeoutSeconds,
        ...(consumerOptions.concurrency !== undefined ? { concurrency: consumerOptions.concurrency } : {}),
        ...(consumerOptions.closeTimeoutMs !== undefined
          ? { closeTimeoutMs: consumerOptions.closeTimeoutMs }
          : {}),
      });
      await transport.start();
      running.push({ consumer: transport, client: killable });
      return transport;
    },

    async publish(messages: readonly HarnessMessage[]) {
      if (fifo || messages.some((m) => m.id === undefined)) {
        await sendDirect(messages);
        return;
      }
      await publisher.publish(
        messages.map((m) => ({
          destination: queues.queueUrl,
          id: m.id!,
          body: m.body,
          ...(m.headers !== undefined ? { headers: m.headers } : {}),
          ...(m.key !== undefined ? { key: m.key } : {}),
        })),
      );
    },

    oversizedDeadLetter(id: string): HarnessMessage {
      // A body 6,000 bytes under SQS's 256 KiB and a 2,000-byte header: with the 2,000-character error and its
      // stack the full dead letter is over the limit, the compact one (no stack, 500 characters) under it.
      const body = JSON.stringify({
        kind: 'oversized',
        pad: 'p'.repeat(DEFAULT_MAX_SQS_MESSAGE_BYTES - 6_000),
      });
      return { id, body, headers: { 'x-trace': 't'.repeat(2_000) }, ...(fifo ? { key: id } : {}) };
    },

    async readDeadLetters(count: number, timeoutMs: number): Promise<DeadLetterEntry[]> {
      const reader = sqsDeadLetterQueue({ client, queueUrl: queues.deadLetterQueueUrl, waitTimeSeconds: 1 });
      const letters: DeadLetterEntry[] = [];
      const deadline = Date.now() + timeoutMs;
      while (letters.length < count && Date.now() < deadline) {
        for await (const taken of reader.take({ limit: count - letters.length })) {
          await taken.remove();
          letters.push({ id: taken.id, body: taken.body, headers: taken.headers, position: taken.position });
        }
      }
      await reader.close();
      return letters;
    },

    async crash() {
      for (const r of running.splice(0)) {
        r.client.kill();
        // The dead process's consumer winds down on its own (its calls all fail); dispose() awaits it.
        crashed.push(r.consumer.stop());
      }
    },

    async dispose() {
      await Promise.allSettled([...crashed, ...running.splice(0).map((r) => r.consumer.stop())]);
      await publisher.close();
      await deleteQueues(client, queues);
      client.destroy();
    },
  };
}
