// Issue 22, item 9: stop() must not wait for a long poll to run out (up to 20 s, the default waitTimeSeconds):
// a deploy's SIGTERM handler then ends in time. The receive in flight is aborted; whatever the queue holds is
// still there for the next consumer. Against ElasticMQ, with a client that records how each receive ended.

import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { idempotentConsumer } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { sqsConsumer, sqsPublisher } from '../src/index.js';
import type { CreatedQueues, SqsClient } from '../src/index.js';
import { deleteQueues, freshQueues, testSqsClient } from './support/sqs-test-client.js';

let client: SQSClient;
const created: CreatedQueues[] = [];

beforeAll(() => {
  client = testSqsClient();
});
afterAll(async () => {
  for (const q of created) await deleteQueues(client, q);
  client.destroy();
});

/** Forwards to the real client and records, for every ReceiveMessage, whether SQS answered it or it was aborted. */
class RecordingClient {
  readonly receives: Promise<'answered' | 'aborted' | 'failed'>[] = [];
  #firstReceive: (() => void) | undefined;
  readonly firstReceive = new Promise<void>((resolve) => (this.#firstReceive = resolve));

  readonly send = ((command: unknown, options?: { abortSignal?: AbortSignal }) => {
    const sent = (client.send as (c: unknown, o?: unknown) => Promise<unknown>)(command, options);
    if (command instanceof ReceiveMessageCommand) {
      this.receives.push(
        sent.then(
          () => 'answered' as const,
          () => (options?.abortSignal?.aborted === true ? ('aborted' as const) : ('failed' as const)),
        ),
      );
      this.#firstReceive?.();
    }
    return sent;
  }) as SqsClient['send'];
}

function consumerOf(recorder: OutcomeRecorder) {
  return idempotentConsumer<unknown, unknown>({
    name: uniqueName('sqs-stop'),
    store: new InMemoryInboxStore(),
    handlerTimeoutMs: 1_500,
    handler: async () => undefined,
    hooks: { onOutcome: recorder.hook },
  });
}

describe('sqsConsumer stop()', () => {
  it('aborts a long poll in flight instead of waiting for it to run out, and the queue keeps what it holds', async () => {
    const q = await freshQueues(client, 'stop-poll', { maxAttempts: 10 });
    created.push(q);
    const recording = new RecordingClient();
    const first = sqsConsumer({
      client: recording,
      queueUrl: q.queueUrl,
      deadLetterQueueUrl: q.deadLetterQueueUrl,
      handler: consumerOf(new OutcomeRecorder()),
      waitTimeSeconds: 20,
      visibilityTimeoutSeconds: 2,
    });
    await first.start();
    await recording.firstReceive;
    await first.stop();
    // Every receive has ended by the time stop() resolves, and the one in flight ended by its abort: SQS had no
    // message to answer it with before its 20 s ran out.
    expect(await Promise.all(recording.receives)).toEqual(recording.receives.map(() => 'aborted'));

    // A message sent after the stop reaches the next consumer: SQS may still hand it to the aborted poll,
    // which it keeps open on its side until its 20 s run out; it is then hidden for one visibility timeout,
    // not lost.
    const id = uniqueName('after-stop');
    await sqsPublisher({ client }).publish([{ destination: q.queueUrl, id, body: '{}' }]);
    const recorder = new OutcomeRecorder();
    const next = sqsConsumer({
      client,
      queueUrl: q.queueUrl,
      deadLetterQueueUrl: q.deadLetterQueueUrl,
      handler: consumerOf(recorder),
      waitTimeSeconds: 1,
    });
    await next.start();
    try {
      await recorder.waitFor(id, 'processed', { timeoutMs: 30_000 });
    } finally {
      await next.stop();
    }
  });
});
