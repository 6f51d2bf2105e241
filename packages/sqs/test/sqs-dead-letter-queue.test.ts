// sqsDeadLetterQueue against ElasticMQ: browsing leaves dead letters in place, take() removes or releases them,
// and a dead letter replayed to its source with the original id and a replay marker is processed once.

import {
  HEADERS,
  PermanentError,
  idempotentConsumer,
  parseDeadLetterHeaders,
  replayHeaders,
} from '@inboxkit/core';
import type { DeadLetterEntry, TransportConsumer } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { sqsConsumer, sqsDeadLetterQueue, sqsPublisher } from '../src/index.js';
import type { CreatedQueues } from '../src/index.js';
import { deleteQueues, freshQueues, testSqsClient } from './support/sqs-test-client.js';

let client: SQSClient;
let q: CreatedQueues;
let transport: TransportConsumer;
const recorder = new OutcomeRecorder();
const ids = [uniqueName('dl'), uniqueName('dl'), uniqueName('dl')];
let fixed = false;

beforeAll(async () => {
  client = testSqsClient();
  q = await freshQueues(client, 'dlq-reader');
  const consumer = idempotentConsumer({
    name: uniqueName('dlq-reader'),
    store: new InMemoryInboxStore(),
    handlerTimeoutMs: 1_500,
    handler: async () => {
      if (!fixed) throw new PermanentError('rejected by rule 7');
    },
    hooks: { onOutcome: recorder.hook },
  });
  transport = sqsConsumer({
    client,
    queueUrl: q.queueUrl,
    deadLetterQueueUrl: q.deadLetterQueueUrl,
    handler: consumer,
    visibilityTimeoutSeconds: 2,
    waitTimeSeconds: 1,
  });
  await transport.start();
  await sqsPublisher({ client }).publish(
    ids.map((id) => ({
      destination: q.queueUrl,
      id,
      body: JSON.stringify({ id }),
      headers: { 'x-tenant': 't1' },
    })),
  );
  for (const id of ids) await recorder.waitFor(id, 'dead-letter');
});
afterAll(async () => {
  await transport?.stop();
  await deleteQueues(client, q);
  client.destroy();
});

async function browse(): Promise<DeadLetterEntry[]> {
  const entries: DeadLetterEntry[] = [];
  for await (const entry of sqsDeadLetterQueue({ client, queueUrl: q.deadLetterQueueUrl }).browse({
    limit: 50,
  })) {
    entries.push(entry);
  }
  return entries;
}

describe('sqsDeadLetterQueue', () => {
  it('browses dead letters with their full record and leaves them in the queue', async () => {
    const first = await browse();
    expect(first.map((e) => e.id).sort()).toEqual([...ids].sort());
    for (const entry of first) {
      expect(entry.headers['x-tenant']).toBe('t1');
      expect(parseDeadLetterHeaders(entry.headers)).toMatchObject({
        originalId: entry.id,
        reason: 'permanent-error',
        attempts: 1,
        error: { name: 'PermanentError', message: 'rejected by rule 7' },
        source: { transport: 'sqs', destination: q.queueUrl },
      });
    }
    expect((await browse()).map((e) => e.id).sort(), 'a second browse sees the same dead letters').toEqual(
      [...ids].sort(),
    );
  });

  it('takes dead letters one at a time: removed ones are gone, released ones stay', async () => {
    const reader = sqsDeadLetterQueue({ client, queueUrl: q.deadLetterQueueUrl });
    const seen: string[] = [];
    for await (const taken of reader.take({ limit: 10 })) {
      seen.push(taken.id!);
      if (seen.length === 1) await taken.release();
      else await taken.remove();
    }
    expect(seen.sort()).toEqual([...ids].sort());
    const left = await browse();
    expect(left).toHaveLength(1);
  });

  it('replays a dead letter to its source with its original id: processed once, then removed', async () => {
    fixed = true;
    const reader = sqsDeadLetterQueue({ client, queueUrl: q.deadLetterQueueUrl });
    const publisher = sqsPublisher({ client });
    let replayed: string | undefined;
    for await (const taken of reader.take({ limit: 1 })) {
      const record = parseDeadLetterHeaders(taken.headers)!;
      const headers = Object.fromEntries(
        Object.entries(taken.headers).filter(
          ([k]) => !k.startsWith('x-inboxkit-') && k !== HEADERS.messageId,
        ),
      );
      await publisher.publish([
        {
          destination: record.source.destination!,
          id: taken.id!,
          body: taken.body as string,
          headers: { ...headers, ...replayHeaders({ replayId: 'replay-1', requestedBy: 'test' }) },
        },
      ]);
      await taken.remove();
      replayed = taken.id;
    }
    const outcome = await recorder.waitFor(replayed, 'processed');
    expect(outcome.message.replay).toMatchObject({ replayId: 'replay-1', requestedBy: 'test' });
    expect(outcome.message.headers['x-tenant']).toBe('t1');
    expect(await browse()).toEqual([]);
  });
});
