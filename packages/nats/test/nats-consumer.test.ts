// The NATS transport's own promises beyond the conformance suite, on the real server: the id read from
// Nats-Msg-Id and CloudEvents, working() keeping a handler that outlasts the ack wait, the publisher's msgID
// (JetStream drops a re-send within its duplicate window), max_deliver as a backstop that dead-letters with a
// record, the DLQ reader (browse in place, take + remove), and the configuration errors.

import { attemptLedgerOf, ConfigurationError, idempotentConsumer, withAttemptLedger } from '@inboxkit/core';
import type { IdempotentConsumer, TransportConsumer } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';

import { natsConsumer, natsDeadLetterQueue, natsPublisher } from '../src/index.js';
import { natsHarness } from './nats-harness.js';
import type { NatsHarness } from './nats-harness.js';

const harnesses: NatsHarness[] = [];
const consumers: TransportConsumer[] = [];
afterEach(async () => {
  for (const c of consumers.splice(0)) await c.stop();
  for (const h of harnesses.splice(0)) await h.dispose();
});

async function fresh(): Promise<NatsHarness> {
  const h = await natsHarness();
  harnesses.push(h);
  return h;
}

/** Polls until `condition` holds, up to a deadline generous for a loaded machine. */
async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function recordingConsumer(
  handler: (id: string, attempt: number) => Promise<void> | void = () => undefined,
  extra: { maxAttempts?: number } = {},
): { consumer: IdempotentConsumer<unknown, unknown>; applied: string[]; outcomes: string[] } {
  const applied: string[] = [];
  const outcomes: string[] = [];
  const consumer = idempotentConsumer<unknown, unknown>({
    name: 'nats-test',
    store: new InMemoryInboxStore(),
    ...extra,
    backoff: { initialDelayMs: 20, maxDelayMs: 50, jitter: 'none' },
    handler: async (message, context) => {
      await handler(message.id, context.attempt);
      applied.push(message.id);
    },
    hooks: {
      onOutcome: ({ outcome }) => void outcomes.push(`${outcome.status}:${outcome.messageId ?? '-'}`),
    },
  });
  return { consumer, applied, outcomes };
}

describe('natsConsumer', () => {
  it('reads the id from Nats-Msg-Id, else message-id, else a CloudEvents id (binary or structured)', async () => {
    const h = await fresh();
    const js = jetstream(h.connection);
    const subject = `${h.subjectPrefix}.ids`;
    await js.publish(subject, '{}', { msgID: 'from-msg-id' });
    const ce = headers();
    ce.set('ce-id', 'from-ce-id');
    await js.publish(subject, '{}', { headers: ce });
    await js.publish(
      subject,
      JSON.stringify({ specversion: '1.0', id: 'from-structured', type: 't', source: 's' }),
    );
    const r = recordingConsumer();
    consumers.push(await h.startConsumer(r.consumer));
    await until('three applied', () => r.applied.length === 3);
    expect(r.applied.sort()).toEqual(['from-ce-id', 'from-msg-id', 'from-structured']);
  });

  it('keeps a handler that outlasts the ack wait with working(): applied once, never redelivered meanwhile', async () => {
    const h = await fresh(); // ack wait 2 s
    let runs = 0;
    const r = recordingConsumer(async () => {
      runs += 1;
      await new Promise((resolve) => setTimeout(resolve, 6_000)); // three ack waits
    });
    consumers.push(await h.startConsumer(r.consumer));
    await natsPublisher({ connection: h.connection }).publish([
      { destination: `${h.subjectPrefix}.all`, id: 'slow-1', body: '{}' },
    ]);
    await until('applied', () => r.applied.length === 1, 90_000);
    await until('acknowledged', async () => {
      const i = await (await jetstreamManager(h.connection)).consumers.info(h.stream, h.durable);
      return i.num_ack_pending === 0 && i.num_pending === 0;
    });
    const info = await (await jetstreamManager(h.connection)).consumers.info(h.stream, h.durable);
    expect(runs).toBe(1);
    // Delivered once (the consumer sequence counts every delivery, redeliveries included), processed once.
    expect(info.delivered.consumer_seq).toBe(1);
    expect(r.outcomes).toEqual(['processed:slow-1']);
  });

  it('publishes with msgID: a re-send of the same id within the duplicate window is not stored twice', async () => {
    const h = await fresh();
    const publisher = natsPublisher({ connection: h.connection });
    const message = { destination: `${h.subjectPrefix}.all`, id: 'once', body: '{"n":1}' };
    await publisher.publish([message]);
    await publisher.publish([message]);
    const info = await (await jetstreamManager(h.connection)).streams.info(h.stream);
    expect(info.state.messages).toBe(1);
  });

  it('dead-letters a retry on the delivery max_deliver allows last, with reason max-deliveries, rather than lose it', async () => {
    const h = await natsHarness({ consumer: { maxDeliver: 3 } });
    harnesses.push(h);
    // maxAttempts 2 keeps max_deliver 3 a valid backstop; a lock wait is a retry that spends no attempt, so only
    // the backstop can end this one: simulate it with a consumer whose every outcome is such a retry.
    const inner = recordingConsumer(undefined, { maxAttempts: 2 });
    const stubborn: IdempotentConsumer<unknown, unknown> = withAttemptLedger({
      ...inner.consumer,
      config: inner.consumer.config,
      name: inner.consumer.name,
      handle: async (m) => ({
        status: 'retry',
        messageId: m.id!,
        delayMs: 50,
        attempt: 0,
        reason: 'lock-timeout',
      }),
      handleBatch: (ms) => Promise.all(ms.map((m) => stubborn.handle(m))),
    }, {
      recordAttemptsStarted: (ms) => attemptLedgerOf(inner.consumer)!.recordAttemptsStarted(ms),
      crashSuspects: async () => new Map(),
    });
    consumers.push(await h.startConsumer(stubborn));
    await natsPublisher({ connection: h.connection }).publish([
      { destination: `${h.subjectPrefix}.all`, id: 'stuck', body: '{}' },
    ]);
    const letters = await h.readDeadLetters(1, 60_000);
    expect(letters.map((l) => [l.id, l.headers['x-inboxkit-reason']])).toEqual([['stuck', 'max-deliveries']]);
  });

  it('rides out an inbox store outage in the process: the message is kept, no delivery spent, applied once', async () => {
    const h = await fresh();
    const inner = recordingConsumer();
    let outage = 6; // six answers "store unavailable" (≈ 100 + 200 + … ms of pauses), then the store is back
    const flaky: IdempotentConsumer<unknown, unknown> = withAttemptLedger({
      ...inner.consumer,
      config: inner.consumer.config,
      name: inner.consumer.name,
      handle: async (m) => {
        if (outage > 0) {
          outage -= 1;
          return { status: 'retry', messageId: m.id!, delayMs: 0, attempt: 0, reason: 'store-unavailable' };
        }
        return inner.consumer.handle(m);
      },
      handleBatch: (ms) => Promise.all(ms.map((m) => flaky.handle(m))),
    }, {
      recordAttemptsStarted: (ms) => attemptLedgerOf(inner.consumer)!.recordAttemptsStarted(ms),
      crashSuspects: async () => new Map(),
    });
    consumers.push(await h.startConsumer(flaky));
    await natsPublisher({ connection: h.connection }).publish([
      { destination: `${h.subjectPrefix}.all`, id: 'outage-1', body: '{}' },
    ]);
    await until('applied', () => inner.applied.length === 1, 60_000);
    await until('acknowledged', async () => {
      const i = await (await jetstreamManager(h.connection)).consumers.info(h.stream, h.durable);
      return i.num_ack_pending === 0 && i.num_pending === 0;
    });
    const info = await (await jetstreamManager(h.connection)).consumers.info(h.stream, h.durable);
    expect(outage).toBe(0);
    // One delivery: the outage was waited out here, never handed back with nak().
    expect(info.delivered.consumer_seq).toBe(1);
    expect(inner.outcomes).toEqual(['processed:outage-1']);
  });

  it('reads its DLQ in place (browse twice, same entries), and take + remove deletes one', async () => {
    const h = await fresh();
    const r = recordingConsumer(
      () => {
        throw Object.assign(new Error('no'), { name: 'PermanentError' });
      },
      { maxAttempts: 1 },
    );
    consumers.push(await h.startConsumer(r.consumer));
    await natsPublisher({ connection: h.connection }).publish(
      ['d1', 'd2'].map((id) => ({
        destination: `${h.subjectPrefix}.all`,
        id,
        body: '{}',
        headers: { 'x-app': id },
      })),
    );
    const dlq = natsDeadLetterQueue({ connection: h.connection, stream: h.deadLetterStream });
    const browse = async () => {
      const out: string[] = [];
      for await (const e of dlq.browse({ limit: 10 }))
        out.push(`${e.id}:${e.headers['x-app']}:${e.headers['x-inboxkit-reason']}`);
      return out.sort();
    };
    await until('two dead letters', async () => (await browse()).length === 2);
    expect(await browse()).toEqual(['d1:d1:max-attempts', 'd2:d2:max-attempts']);
    expect(dlq.nonDestructiveBrowse).toBe(true);
    for await (const taken of dlq.take({ limit: 1 })) await taken.remove();
    expect(await browse()).toHaveLength(1);
  });

  it('refuses a max_deliver that is no backstop, and a dead-letter subject no stream captures', async () => {
    const h = await fresh();
    const { consumer } = recordingConsumer(undefined, { maxAttempts: 5 });
    expect(() =>
      natsConsumer({
        connection: h.connection,
        stream: h.stream,
        consumer: 'x',
        deadLetterSubject: h.deadLetterSubject,
        handler: consumer,
        maxDeliver: 5,
      }),
    ).toThrow(/maxDeliver.*above the handler's maxAttempts/);
    const lost = natsConsumer({
      connection: h.connection,
      stream: h.stream,
      consumer: 'x',
      deadLetterSubject: 'nowhere.at.all',
      handler: consumer,
    });
    await expect(lost.start()).rejects.toThrow(ConfigurationError);
    await expect(lost.start()).rejects.toThrow(/no stream captures the dead-letter subject "nowhere.at.all"/);
    const noStream = natsConsumer({
      connection: h.connection,
      stream: 'NO_SUCH_STREAM',
      consumer: 'x',
      deadLetterSubject: h.deadLetterSubject,
      handler: consumer,
    });
    await expect(noStream.start()).rejects.toThrow(/stream "NO_SUCH_STREAM" does not exist/);
  });
});
