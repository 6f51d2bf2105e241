// The learning broker's mechanics in isolation, driven through LearningTransport with a stand-in consumer:
// settlement, delays, dead letters, replay, duplicates, ordering, crashes, draining.

import { HEADERS, PermanentError, parseDeadLetterHeaders } from '@inboxkit/core';
import type { OutcomeEvent } from '@inboxkit/core';
import { afterEach, describe, expect, it } from 'vitest';

import { LearningBroker, LearningTransport } from '../src/index.js';
import { fakeConsumer } from './support/fake-consumer.js';

const transports: LearningTransport[] = [];

function transport(...args: ConstructorParameters<typeof LearningTransport>): LearningTransport {
  const t = new LearningTransport(...args);
  transports.push(t);
  return t;
}

afterEach(async () => {
  await Promise.all(transports.splice(0).map((t) => t.stop()));
});

const body = (value: unknown): string => JSON.stringify(value);

describe('LearningBroker', () => {
  it('acks processed messages once and drains when everything is settled', async () => {
    const consumer = fakeConsumer();
    const t = transport({ consumer, concurrency: 3 });
    await t.start();
    await t.send([1, 2, 3, 4].map((n) => ({ id: `m${n}`, body: body({ n }) })));
    await t.drain();
    expect(consumer.effects.sort()).toEqual(['m1', 'm2', 'm3', 'm4']);
    expect(t.stats).toMatchObject({
      sent: 4,
      delivered: 4,
      redelivered: 0,
      acked: 4,
      outcomes: { processed: 4 },
    });
    expect(t.broker.size).toBe(0);
  });

  it('redelivers a retry after its delay with a rising delivery count', async () => {
    const seen: { attempt: number; deliveryCount: number | undefined; at: number }[] = [];
    const consumer = fakeConsumer({
      retryDelayMs: 40,
      handler: async ({ attempt, deliveryCount }) => {
        seen.push({ attempt, deliveryCount, at: Date.now() });
        if (attempt < 3) throw new Error('not yet');
      },
    });
    const t = transport({ consumer });
    await t.start();
    await t.send([{ id: 'r', body: body({}) }]);
    await t.drain();
    expect(seen.map((s) => s.deliveryCount)).toEqual([1, 2, 3]);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(38);
    expect(seen[2]!.at - seen[1]!.at).toBeGreaterThanOrEqual(38);
    expect(t.stats).toMatchObject({ delivered: 3, redelivered: 2, retried: 2, acked: 1 });
  });

  it('moves dead letters to the DLQ with the message headers and deadLetterHeaders()', async () => {
    const consumer = fakeConsumer({
      name: 'billing',
      handler: async ({ payload }) => {
        if ((payload as { bad?: boolean }).bad) throw new PermanentError('rejected by rule 7');
      },
    });
    const t = transport({ consumer, queue: 'payments' });
    await t.start();
    await t.send([
      { id: 'bad-1', body: body({ bad: true }), headers: { 'X-Trace': 'abc' } },
      { body: body({}) },
    ]);
    await t.drain();
    const [permanent, missing] = t.deadLetters();
    expect(permanent!.id).toBe('bad-1');
    expect(permanent!.headers).toMatchObject({
      'x-trace': 'abc',
      [HEADERS.reason]: 'permanent-error',
      [HEADERS.originalId]: 'bad-1',
      [HEADERS.consumer]: 'billing',
      [HEADERS.attempts]: '1',
      [HEADERS.errorName]: 'PermanentError',
      [HEADERS.errorMessage]: 'rejected by rule 7',
      [HEADERS.sourceTransport]: 'memory',
      [HEADERS.sourceDestination]: 'payments',
    });
    expect(parseDeadLetterHeaders(permanent!.headers)).toMatchObject({
      reason: 'permanent-error',
      originalId: 'bad-1',
    });
    expect(missing!.id).toBeUndefined();
    expect(missing!.headers[HEADERS.reason]).toBe('missing-id');
    expect(t.stats).toMatchObject({ deadLettered: 2, acked: 0, outcomes: { 'dead-letter': 2 } });
  });

  it('replays dead letters with their original id and a replay marker', async () => {
    const replays: OutcomeEvent[] = [];
    let fixed = false;
    const consumer = fakeConsumer({
      maxAttempts: 1,
      handler: async () => {
        if (!fixed) throw new Error('bug');
      },
      onOutcome: (e) => replays.push(e),
    });
    const t = transport({ consumer });
    await t.start();
    await t.send([{ id: 'p1', body: body({}), key: 'k' }, { body: body({}) }]);
    await t.drain();
    expect(t.deadLetters()).toHaveLength(2);
    fixed = true;
    const result = await t.replayDeadLetters({ replayId: 'replay-1', requestedBy: 'ops' });
    expect(result.replayed).toEqual(['p1']);
    expect(result.skipped).toHaveLength(1);
    await t.drain();
    const replayed = replays.at(-1)!;
    expect(replayed.message.id).toBe('p1');
    expect(replayed.message.replay).toMatchObject({ replayId: 'replay-1', requestedBy: 'ops' });
    expect(replayed.message.headers[HEADERS.reason]).toBeUndefined();
    expect(t.deadLetters()).toHaveLength(1);
    expect(t.stats.replayed).toBe(1);
  });

  it('delivers duplicates on demand', async () => {
    const consumer = fakeConsumer();
    const t = transport({ consumer });
    await t.start();
    await t.send([{ id: 'd', body: body({}) }]);
    await t.drain();
    expect(t.duplicate('d', 2)).toBe(2);
    await t.send([{ id: 'd', body: body({}) }]);
    await t.drain();
    expect(t.stats).toMatchObject({
      delivered: 4,
      duplicatesDelivered: 3,
      outcomes: { processed: 1, duplicate: 3 },
    });
    expect(() => t.duplicate('never-sent')).toThrow(/no message with id "never-sent"/);
  });

  it('reorders waiting messages but keeps the order of messages sharing a key', async () => {
    const order: string[] = [];
    const broker = new LearningBroker();
    await broker.send([
      ...[0, 1, 2, 3, 4].map((n) => ({ id: `a${n}`, key: 'a', body: body({}) })),
      ...[0, 1, 2, 3, 4].map((n) => ({ id: `u${n}`, body: body({}) })),
    ]);
    let seed = 7;
    broker.reorder(() => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646);
    const t = transport({
      broker,
      consumer: fakeConsumer({ handler: async ({ id }) => void order.push(id) }),
    });
    await t.start();
    await broker.drain();
    expect(order.filter((id) => id.startsWith('a'))).toEqual(['a0', 'a1', 'a2', 'a3', 'a4']);
    expect(order.filter((id) => id.startsWith('u'))).not.toEqual(['u0', 'u1', 'u2', 'u3', 'u4']);
  });

  it('handles messages sharing a key one at a time, and a retry holds back the ones behind it', async () => {
    let running = 0;
    let maxRunning = 0;
    const order: string[] = [];
    const consumer = fakeConsumer({
      retryDelayMs: 20,
      handler: async ({ id, attempt }) => {
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        await new Promise((r) => setTimeout(r, 2));
        running -= 1;
        if (id === 'k1' && attempt === 1) throw new Error('once');
        order.push(id);
      },
    });
    const t = transport({ consumer, concurrency: 4 });
    await t.start();
    await t.send(['k0', 'k1', 'k2', 'k3'].map((id) => ({ id, key: 'k', body: body({}) })));
    await t.drain();
    expect(order).toEqual(['k0', 'k1', 'k2', 'k3']);
    expect(maxRunning).toBe(1);
  });

  it('a crash before the handler loses the delivery; it comes back after the visibility timeout', async () => {
    const consumer = fakeConsumer();
    const t = transport({ consumer, visibilityTimeoutMs: 30 });
    await t.start();
    t.injectCrash('before-handler', { id: 'c' });
    const started = Date.now();
    await t.send([
      { id: 'c', body: body({}) },
      { id: 'other', body: body({}) },
    ]);
    await t.drain();
    expect(Date.now() - started).toBeGreaterThanOrEqual(28);
    expect(consumer.effects.sort()).toEqual(['c', 'other']);
    expect(t.stats).toMatchObject({
      delivered: 3,
      redelivered: 1,
      crashes: { 'before-handler': 1 },
      outcomes: { processed: 2 },
    });
    expect(t.broker.pendingCrashes).toBe(0);
  });

  it('a crash after the commit loses the ack; the redelivery is a duplicate', async () => {
    const consumer = fakeConsumer();
    const t = transport({ consumer, visibilityTimeoutMs: 10 });
    await t.start();
    t.injectCrash('after-commit-before-ack', { times: 2 });
    await t.send([{ id: 'a', body: body({}) }]);
    await t.drain();
    expect(consumer.effects).toEqual(['a']);
    expect(t.stats).toMatchObject({
      delivered: 3,
      acked: 1,
      crashes: { 'after-commit-before-ack': 2 },
      outcomes: { processed: 1, duplicate: 2 },
    });
  });

  it('crash() loses every delivery in flight and discards its outcome; another consumer gets the message', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inHandler = new Promise<void>((r) => (entered = r));
    const first = fakeConsumer({
      handler: async () => {
        entered();
        await held;
      },
    });
    const broker = new LearningBroker({ visibilityTimeoutMs: 20 });
    const dying = transport({ consumer: first, broker });
    await dying.start();
    await broker.send([{ id: 'x', body: body({}) }]);
    await inHandler;
    broker.crash();
    await dying.stop(); // resolves at once: the process is dead
    const second = fakeConsumer();
    const survivor = transport({ consumer: second, broker });
    await survivor.start();
    release();
    await broker.drain();
    expect(second.effects).toEqual(['x']);
    expect(broker.stats).toMatchObject({ processCrashes: 1, acked: 1, outcomes: { processed: 1 } });
  });

  it('stop() waits for running handlers and settles them', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const started = new Promise<void>((r) => (entered = r));
    const consumer = fakeConsumer({
      handler: async () => {
        entered();
        await held;
      },
    });
    const t = transport({ consumer });
    await t.start();
    await t.send([{ id: 's', body: body({}) }]);
    await started;
    const stopped = t.stop();
    release();
    await stopped;
    expect(t.stats).toMatchObject({ acked: 1, abandoned: 0 });
    expect(t.broker.size).toBe(0);
  });

  it('stop() gives up a handler that outlives the close timeout; its message stays on the queue', async () => {
    let entered!: () => void;
    const started = new Promise<void>((r) => (entered = r));
    const consumer = fakeConsumer({
      handler: async () => {
        entered();
        await new Promise((r) => setTimeout(r, 100));
      },
    });
    const t = transport({ consumer, closeTimeoutMs: 10 });
    await t.start();
    await t.send([{ id: 'slow', body: body({}) }]);
    await started;
    await t.stop();
    expect(t.stats.abandoned).toBe(1);
    expect(t.broker.size).toBe(1);
    await t.broker.whenIdle();
    expect(t.stats.acked).toBe(0);
  });

  it('whenIdle() resolves while a retried message waits for its delay', async () => {
    const consumer = fakeConsumer({
      retryDelayMs: 60_000,
      handler: async () => {
        throw new Error('later');
      },
    });
    const t = transport({ consumer });
    await t.start();
    await t.send([{ id: 'w', body: body({}) }]);
    await t.whenIdle();
    expect(t.broker.size).toBe(1);
    expect(t.stats.retried).toBe(1);
  });

  it('drain() rejects with the queue state when nothing consumes', async () => {
    const broker = new LearningBroker({ name: 'orphans' });
    await broker.send([{ id: 'lonely', body: body({}) }]);
    await expect(broker.drain({ timeoutMs: 20 })).rejects.toThrow(
      /drain\(\) timed out after 20 ms[\s\S]*queue orphans: 1 messages[\s\S]*"lonely": ready/,
    );
    broker.close();
  });
});
