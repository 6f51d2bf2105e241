// sqsConsumer against ElasticMQ and real Postgres: duplicates applied once, poison dead-lettered after
// maxAttempts with readable headers, the visibility heartbeat, FIFO order under retries, stop() returning what
// waits, and the start-up checks.

import { setTimeout as sleep } from 'node:timers/promises';

import { DeleteQueueCommand, GetQueueAttributesCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSClient } from '@aws-sdk/client-sqs';
import {
  attemptLedgerOf,
  ConfigurationError,
  PermanentError,
  RetryableError,
  idempotentConsumer,
  parseDeadLetterHeaders,
  withAttemptLedger,
} from '@inboxkit/core';
import type { IdempotentConsumer, IdempotentConsumerConfig, InboundMessage, TransportConsumer } from '@inboxkit/core';
import { PostgresInboxStore } from '@inboxkit/core/postgres';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { sqsConsumer, sqsDeadLetterQueue, sqsPublisher } from '../src/index.js';
import type { CreatedQueues, SqsConsumerOptions } from '../src/index.js';
import { effectCounts, effectsInOrder, insertEffect, openTestDatabase } from './support/postgres.js';
import type { TestDatabase, TestDB, TestTx } from './support/postgres.js';
import { deleteQueues, freshQueues, testSqsClient } from './support/sqs-test-client.js';

let client: SQSClient;
let t: TestDatabase;
let store: PostgresInboxStore<TestDB>;
const created: CreatedQueues[] = [];
const running: TransportConsumer[] = [];

const FAST_BACKOFF = { initialDelayMs: 100, multiplier: 2, maxDelayMs: 200, jitter: 'none' } as const;

beforeAll(async () => {
  client = testSqsClient();
  t = await openTestDatabase('consumer');
  store = new PostgresInboxStore({ db: t.db, schema: t.schema });
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((c) => c.stop()));
});
afterAll(async () => {
  for (const q of created) await deleteQueues(client, q);
  client.destroy();
  await t?.close();
});

async function queues(prefix: string, options: { fifo?: boolean } = {}): Promise<CreatedQueues> {
  const q = await freshQueues(client, prefix, { ...options, maxAttempts: 10 });
  created.push(q);
  return q;
}

/** Messages waiting, in flight (received, not deleted) and delayed in a queue. */
async function depth(queueUrl: string): Promise<{ visible: number; inFlight: number }> {
  const { Attributes: a = {} } = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return {
    visible: Number(a.ApproximateNumberOfMessages),
    inFlight: Number(a.ApproximateNumberOfMessagesNotVisible),
  };
}

function consumerOf(
  config: Partial<IdempotentConsumerConfig<unknown, TestTx>> &
    Pick<IdempotentConsumerConfig<unknown, TestTx>, 'handler'>,
) {
  const recorder = new OutcomeRecorder();
  const consumer = idempotentConsumer<unknown, TestTx>({
    name: uniqueName('sqs-consumer'),
    store,
    handlerTimeoutMs: 1_500,
    backoff: FAST_BACKOFF,
    hooks: { onOutcome: recorder.hook },
    ...config,
  });
  return { consumer, recorder };
}

async function start(
  q: CreatedQueues,
  handler: SqsConsumerOptions<unknown, TestTx>['handler'],
  options: Partial<SqsConsumerOptions<unknown, TestTx>> = {},
): Promise<TransportConsumer> {
  const consumer = sqsConsumer({
    client,
    queueUrl: q.queueUrl,
    deadLetterQueueUrl: q.deadLetterQueueUrl,
    handler,
    visibilityTimeoutSeconds: 2,
    waitTimeSeconds: 1,
    ...options,
  });
  await consumer.start();
  running.push(consumer);
  return consumer;
}

describe('sqsConsumer', () => {
  it.each([
    ['forwards its ledger\'s crashSuspects: the retries of recorded failures run side by side', true],
    ['wraps the consumer with a ledger without crashSuspects: every redelivery runs alone', false],
  ] as const)('a consumer that %s', async (_, forwards) => {
    // Each of six messages fails its first attempt on record (a plain retry, no crash suspect), then its retry
    // holds its handler 300 ms. Told which messages are suspects, the transport runs the retries together; not
    // told (an older wrapper of the consumer), it must assume each may have crashed and run it alone.
    const q = await queues(forwards ? 'suspects-told' : 'suspects-unknown');
    const tried = new Set<string>();
    let now = 0;
    let most = 0;
    const { consumer, recorder } = consumerOf({
      handler: async (message, { tx }) => {
        if (!tried.has(message.id)) {
          tried.add(message.id);
          throw new RetryableError('first attempt', { delayMs: 0 });
        }
        now += 1;
        most = Math.max(most, now);
        await sleep(300);
        now -= 1;
        await insertEffect(tx, t.schema, { consumer: consumer.name, messageId: message.id });
      },
    });
    const ledger = attemptLedgerOf(consumer)!;
    const wrapper: IdempotentConsumer<unknown, TestTx> = withAttemptLedger(
      {
        name: consumer.name,
        config: consumer.config,
        handle: (m) => consumer.handle(m),
        handleBatch: (ms) => consumer.handleBatch(ms),
      },
      {
        recordAttemptsStarted: (ms) => ledger.recordAttemptsStarted(ms),
        ...(forwards ? { crashSuspects: (ms: readonly InboundMessage[]) => ledger.crashSuspects!(ms) } : {}),
      },
    );
    const ids = Array.from({ length: 6 }, (_, n) => `suspect-${forwards ? 'told' : 'unknown'}-${n}`);
    await sqsPublisher({ client }).publish(ids.map((id) => ({ destination: q.queueUrl, id, body: '{}' })));
    await start(q, wrapper, { concurrency: 6 });
    await recorder.waitForCount(ids.length, { status: 'processed', timeoutMs: 30_000 });
    const counts = await effectCounts(t.db, t.schema, consumer.name);
    expect(ids.map((id) => counts.get(id))).toEqual(ids.map(() => 1));
    if (forwards) expect(most, 'retries running at once').toBeGreaterThan(1);
    else expect(most, 'redeliveries running at once').toBe(1);
  });

  it.each(['message', 'batch'] as const)(
    'applies each message once when every message arrives three times, concurrently (%s mode)',
    async (mode) => {
      const q = await queues(`dups-${mode}`);
      const { consumer, recorder } = consumerOf({
        handler: async (message, { tx }) =>
          insertEffect(tx, t.schema, { consumer: consumer.name, messageId: message.id }),
      });
      await start(q, consumer, { concurrency: 10, mode });
      const ids = Array.from({ length: 60 }, (_, n) => `dup-${n}`);
      const copies = [...ids, ...ids, ...ids].sort(() => Math.random() - 0.5);
      await sqsPublisher({ client }).publish(
        copies.map((id) => ({ destination: q.queueUrl, id, body: JSON.stringify({ id }) })),
      );

      await recorder.waitForCount(copies.length, { status: ['processed', 'duplicate'], timeoutMs: 30_000 });
      const counts = await effectCounts(t.db, t.schema, consumer.name);
      expect(
        ids.filter((id) => counts.get(id) !== 1),
        'ids not applied exactly once',
      ).toEqual([]);
      expect(recorder.counts()).toMatchObject({ processed: 60, duplicate: 120, 'dead-letter': 0 });
      await running.pop()!.stop();
      expect(await depth(q.queueUrl), 'every copy is deleted').toEqual({ visible: 0, inFlight: 0 });
    },
  );

  it('dead-letters a poison message after maxAttempts, with headers core reads back, and deletes it', async () => {
    const q = await queues('poison');
    const { consumer, recorder } = consumerOf({
      maxAttempts: 3,
      handler: async () => {
        throw new Error('constraint violated');
      },
    });
    await start(q, consumer);
    const id = uniqueName('poison');
    const body = JSON.stringify({ total: -1 });
    await sqsPublisher({ client }).publish([
      { destination: q.queueUrl, id, body, headers: { 'trace-id': 'abc' } },
    ]);

    await recorder.waitFor(id, 'dead-letter', { timeoutMs: 20_000 });
    expect(recorder.outcomes(id).map((o) => o.status)).toEqual(['retry', 'retry', 'dead-letter']);
    expect(
      recorder
        .outcomes(id)
        .map((o) => (o.status === 'dead-letter' ? o.attempts : 'attempt' in o ? o.attempt : 0)),
    ).toEqual([1, 2, 3]);

    const dlq = sqsDeadLetterQueue({ client, queueUrl: q.deadLetterQueueUrl });
    const letters = [];
    for await (const entry of dlq.browse({ limit: 10 })) letters.push(entry);
    expect(letters).toHaveLength(1);
    const [letter] = letters;
    expect(letter!.id).toBe(id);
    expect(letter!.body).toBe(body);
    expect(letter!.headers['trace-id']).toBe('abc');
    expect(parseDeadLetterHeaders(letter!.headers)).toMatchObject({
      originalId: id,
      consumer: consumer.name,
      reason: 'max-attempts',
      attempts: 3,
      error: { name: 'Error', message: 'constraint violated' },
      source: { transport: 'sqs', destination: q.queueUrl },
    });
    await running.pop()!.stop();
    expect(await depth(q.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('keeps a message whose dead letter SQS did not accept: it comes back and is dead-lettered again', async () => {
    const q = await queues('dlq-down');
    await client.send(new DeleteQueueCommand({ QueueUrl: q.deadLetterQueueUrl }));
    const { consumer, recorder } = consumerOf({
      handler: async () => {
        throw new PermanentError('never');
      },
    });
    await start(q, consumer, { checkQueues: false });
    const id = uniqueName('undeliverable');
    await sqsPublisher({ client }).publish([{ destination: q.queueUrl, id, body: '{}' }]);
    await recorder.waitForCount(2, { id, status: 'dead-letter', timeoutMs: 15_000 });
    await running.pop()!.stop();
    const { visible, inFlight } = await depth(q.queueUrl);
    expect(visible + inFlight, 'the source message was deleted without a dead letter').toBe(1);
  });

  it('keeps a message invisible while its handler runs longer than the visibility timeout (heartbeat)', async () => {
    const q = await queues('heartbeat');
    let entered = 0;
    let enteredOnce!: () => void;
    const inHandler = new Promise<void>((resolve) => (enteredOnce = resolve));
    const { consumer, recorder } = consumerOf({
      handler: async (message, { tx }) => {
        entered++;
        enteredOnce();
        // Ignores its aborted signal: runs 6 s against a 3 s visibility timeout.
        await sleep(6_000);
        await insertEffect(tx, t.schema, { consumer: consumer.name, messageId: message.id });
      },
    });
    await start(q, consumer, { concurrency: 4, visibilityTimeoutSeconds: 3 });
    const id = uniqueName('slow');
    await sqsPublisher({ client }).publish([{ destination: q.queueUrl, id, body: '{}' }]);
    await inHandler;
    // 4 s in: past the 3 s visibility timeout the receive set, 2 s before the handler ends.
    await sleep(4_000);
    const peek = await client.send(
      new ReceiveMessageCommand({ QueueUrl: q.queueUrl, VisibilityTimeout: 1, WaitTimeSeconds: 0 }),
    );
    expect(peek.Messages ?? [], 'the message became visible while its handler ran').toEqual([]);

    await recorder.waitFor(id, 'processed', { timeoutMs: 10_000 });
    await running.pop()!.stop();
    expect(entered).toBe(1);
    expect(recorder.outcomes(id).map((o) => o.status)).toEqual(['processed']);
    expect(await depth(q.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('keeps FIFO order per message group under retries, one message per group at a time, groups in parallel', async () => {
    const q = await queues('fifo-order', { fifo: true });
    const failedOnce = new Set<string>();
    const inFlight = new Map<string, number>();
    let maxGroupsAtOnce = 0;
    const { consumer, recorder } = consumerOf({
      handler: async (message, { tx }) => {
        const { group, n } = message.payload as { group: string; n: number };
        inFlight.set(group, (inFlight.get(group) ?? 0) + 1);
        maxGroupsAtOnce = Math.max(maxGroupsAtOnce, [...inFlight.values()].filter((v) => v > 0).length);
        try {
          expect(inFlight.get(group), `two messages of group ${group} ran at once`).toBe(1);
          await sleep(10);
          if (n % 3 === 1 && !failedOnce.has(message.id)) {
            failedOnce.add(message.id);
            throw new RetryableError('not yet', { delayMs: n === 4 ? 1_000 : 0 });
          }
          await insertEffect(tx, t.schema, {
            consumer: consumer.name,
            messageId: message.id,
            groupKey: group,
            n,
          });
        } finally {
          inFlight.set(group, inFlight.get(group)! - 1);
        }
      },
    });
    await start(q, consumer, { concurrency: 8 });
    const groups = ['g1', 'g2', 'g3', 'g4'];
    const messages = Array.from({ length: 8 }, (_, n) => n).flatMap((n) =>
      groups.map((group) => ({
        destination: q.queueUrl,
        id: `${group}-${n}`,
        key: group,
        body: JSON.stringify({ group, n }),
      })),
    );
    await sqsPublisher({ client }).publish(messages);

    for (const m of messages) await recorder.waitFor(m.id, 'processed', { timeoutMs: 30_000 });
    const effects = await effectsInOrder(t.db, t.schema, consumer.name);
    for (const group of groups) {
      expect(
        effects.filter((e) => e.group_key === group).map((e) => e.n),
        `order of ${group}`,
      ).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    }
    expect(failedOnce.size).toBe(groups.length * 3);
    expect(maxGroupsAtOnce, 'groups ran one after another').toBeGreaterThan(1);
    await running.pop()!.stop();
    expect(await depth(q.queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('returns the FIFO messages waiting behind a running one to the queue when stopped', async () => {
    const q = await queues('fifo-stop', { fifo: true });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let enter!: () => void;
    const entered = new Promise<void>((resolve) => (enter = resolve));
    const { consumer, recorder } = consumerOf({
      handler: async (message, { tx }) => {
        enter();
        await gate;
        await insertEffect(tx, t.schema, { consumer: consumer.name, messageId: message.id });
      },
    });
    // Published before the consumer starts, so that one receive brings all three.
    await sqsPublisher({ client }).publish(
      ['a', 'b', 'c'].map((id) => ({
        destination: q.queueUrl,
        id: `stop-${id}`,
        key: 'one-group',
        body: '{}',
      })),
    );
    // Not aborting the long poll in flight: SQS would hand b and c to the aborted poll once a is deleted, and
    // they would reappear only after the visibility timeout (sqs-stop.test.ts covers the default).
    const transport = await start(q, consumer, { abortReceiveOnStop: false });
    await entered;
    const stopped = transport.stop();
    release();
    await stopped;
    expect(recorder.events.map((e) => `${e.id} ${e.outcome.status}`)).toEqual(['stop-a processed']);
    expect(await depth(q.queueUrl), 'b and c are visible again at once').toEqual({ visible: 2, inFlight: 0 });
  });

  it('sends full DeleteMessageBatch requests while messages are still being handled, and a lone delete after deleteBatchDelayMs', async () => {
    const q = await queues('delete-batches');
    // The same ElasticMQ, through a client that records each DeleteMessageBatch request: entries and time sent.
    const counting = testSqsClient();
    const requests: { entries: number; at: number }[] = [];
    counting.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'DeleteMessageBatchCommand') {
          requests.push({
            entries: (args.input as { Entries: unknown[] }).Entries.length,
            at: performance.now(),
          });
        }
        return next(args);
      },
      { step: 'initialize', name: 'recordDeletes' },
    );
    try {
      // Handlers settle in waves of ten, spread over 0–20 ms: a fixed 5 ms delay would send a request for every
      // few of them. Each call waits until ten are running (a request's worth), so that how many settle together
      // does not depend on how fast a loaded machine runs them; and a delete may wait up to the longest bound
      // (1,000 ms) for the others of its wave, however slowly their transactions commit.
      const wave: (() => void)[] = [];
      const { consumer, recorder } = consumerOf({
        handler: async (message, { tx }) => {
          await new Promise<void>((resolve) => {
            wave.push(resolve);
            if (wave.length === 10) for (const go of wave.splice(0)) go();
          });
          await sleep(Math.random() * 20);
          await insertEffect(tx, t.schema, { consumer: consumer.name, messageId: message.id });
        },
      });
      await start(q, consumer, { client: counting, concurrency: 10, deleteBatchMaxDelayMs: 1_000 });
      const ids = Array.from({ length: 100 }, (_, n) => `del-${n}`);
      await sqsPublisher({ client }).publish(
        ids.map((id) => ({ destination: q.queueUrl, id, body: JSON.stringify({ id }) })),
      );
      await recorder.waitForCount(ids.length, { status: 'processed', timeoutMs: 30_000 });
      await running.pop()!.stop();
      expect(
        requests.reduce((sum, r) => sum + r.entries, 0),
        'every message deleted once',
      ).toBe(100);
      expect(
        requests.length,
        `entries per request: ${requests.map((r) => r.entries).join(' ')}`,
      ).toBeLessThanOrEqual(15);
      expect(await depth(q.queueUrl)).toEqual({ visible: 0, inFlight: 0 });

      // Nothing else held: the delete does not wait for deleteBatchMaxDelayMs.
      requests.length = 0;
      let processedAt = 0;
      const lone = consumerOf({
        handler: async (message, { tx }) =>
          insertEffect(tx, t.schema, { consumer: 'lone', messageId: message.id }),
        hooks: { onOutcome: () => void (processedAt = performance.now()) },
      });
      await start(q, lone.consumer, { client: counting, deleteBatchMaxDelayMs: 1_000 });
      await sqsPublisher({ client }).publish([{ destination: q.queueUrl, id: 'lone', body: '{}' }]);
      await expect.poll(() => requests.length, { timeout: 10_000 }).toBe(1);
      expect(
        requests[0]!.at - processedAt,
        'sent after deleteBatchDelayMs, not the 1,000 ms bound',
      ).toBeLessThan(500);
    } finally {
      counting.destroy();
    }
  });

  it('refuses a deleteBatchMaxDelayMs below deleteBatchDelayMs, saying the range', async () => {
    const q = await queues('delete-config');
    const { consumer } = consumerOf({ handler: async () => undefined });
    const options = {
      client,
      queueUrl: q.queueUrl,
      deadLetterQueueUrl: q.deadLetterQueueUrl,
      handler: consumer,
    };
    expect(() => sqsConsumer({ ...options, deleteBatchDelayMs: 20, deleteBatchMaxDelayMs: 10 })).toThrow(
      /deleteBatchMaxDelayMs must be from deleteBatchDelayMs \(20\) to 1000, got 10/,
    );
    // A larger deleteBatchDelayMs raises the default bound with it.
    expect(() => sqsConsumer({ ...options, deleteBatchDelayMs: 200 })).not.toThrow();
  });

  it('refuses a visibility timeout that does not exceed the handler timeout, saying what to change', async () => {
    const q = await queues('config');
    const { consumer } = consumerOf({ handler: async () => undefined, handlerTimeoutMs: 30_000 });
    expect(() =>
      sqsConsumer({
        client,
        queueUrl: q.queueUrl,
        deadLetterQueueUrl: q.deadLetterQueueUrl,
        handler: consumer,
        visibilityTimeoutSeconds: 30,
      }),
    ).toThrow(
      /visibilityTimeoutSeconds \(30 s\) must exceed the consumer's handlerTimeoutMs \(30000 ms\): raise visibilityTimeoutSeconds to at least 31/,
    );
  });

  it('fails start() when the redrive policy would move messages before maxAttempts, or a queue does not exist', async () => {
    const tight = await freshQueues(client, 'tight-redrive', { maxAttempts: 3, headroom: 0 });
    created.push(tight);
    const { consumer } = consumerOf({ handler: async () => undefined, maxAttempts: 5 });
    const rejected = sqsConsumer({
      client,
      queueUrl: tight.queueUrl,
      deadLetterQueueUrl: tight.deadLetterQueueUrl,
      handler: consumer,
      visibilityTimeoutSeconds: 2,
    }).start();
    await expect(rejected).rejects.toThrow(ConfigurationError);
    await expect(rejected).rejects.toThrow(
      /moves messages after 3 receives, which is not above maxAttempts \(5\)/,
    );

    const missing = sqsConsumer({
      client,
      queueUrl: `${tight.queueUrl}-missing`,
      deadLetterQueueUrl: tight.deadLetterQueueUrl,
      handler: consumer,
      visibilityTimeoutSeconds: 2,
    }).start();
    await expect(missing).rejects.toThrow(/does not exist/);
  });
});
