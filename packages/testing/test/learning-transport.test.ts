// The learning transport with the real core: exactly-once effect through a crash at every seam (in-memory
// store and PGlite), crash loops reaching the DLQ, retries, replay, and a crash of the whole process.

import { PGlite } from '@electric-sql/pglite';
import { PermanentError, RetryableError, idempotentConsumer } from '@inboxkit/core';
import type { IdempotentConsumerConfig } from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import type { InMemoryTransaction } from '@inboxkit/core/memory';
import { PostgresInboxStore, migrateInbox } from '@inboxkit/core/postgres';
import { Kysely, sql } from 'kysely';
import type { Transaction } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import { afterEach, describe, expect, it } from 'vitest';

import { CRASH_SEAMS, LearningBroker, LearningTransport, OutcomeRecorder, uniqueName } from '../src/index.js';
import type { CrashSeam } from '../src/index.js';

const transports: LearningTransport<never, never>[] = [];

function start<P, Tx>(transport: LearningTransport<P, Tx>): Promise<void> {
  transports.push(transport as unknown as LearningTransport<never, never>);
  return transport.start();
}

afterEach(async () => {
  await Promise.all(transports.splice(0).map((t) => t.stop()));
});

function memoryConsumer(overrides: Partial<IdempotentConsumerConfig<unknown, InMemoryTransaction>> = {}) {
  const store = new InMemoryInboxStore();
  const recorder = new OutcomeRecorder();
  const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
    name: uniqueName('learning'),
    store,
    handler: async (message, { tx }) => tx.stage(message.id),
    backoff: { initialDelayMs: 10, maxDelayMs: 40, jitter: 'none' },
    hooks: { onOutcome: recorder.hook },
    ...overrides,
  });
  return { store, recorder, consumer };
}

const body = JSON.stringify({ total: 5 });

describe('LearningTransport with the real core', () => {
  it.each(CRASH_SEAMS)(
    'applies a message exactly once when the process crashes %s',
    async (seam: CrashSeam) => {
      const { store, consumer, recorder } = memoryConsumer();
      const transport = new LearningTransport({ consumer, visibilityTimeoutMs: 20 });
      await start(transport);
      transport.injectCrash(seam, { id: 'o-1' });
      await transport.send([
        { id: 'o-1', body },
        { id: 'o-2', body },
      ]);
      await transport.drain();

      expect(store.countEffects(consumer.name, 'o-1')).toBe(1);
      expect(store.countEffects(consumer.name, 'o-2')).toBe(1);
      expect(transport.stats.crashes[seam]).toBe(1);
      expect(transport.stats.redelivered).toBe(1);
      expect(transport.broker.pendingCrashes).toBe(0);
      // After a crash after the commit the redelivery finds the id completed; otherwise it applies it.
      const statuses = recorder.outcomes('o-1').map((o) => o.status);
      expect(statuses).toEqual(
        seam === 'after-commit-before-ack' ? ['processed', 'duplicate'] : ['processed'],
      );
    },
  );

  it('exposes an effect written outside the transaction when the process crashes before the commit', async () => {
    const outside: string[] = [];
    const { consumer } = memoryConsumer({
      handler: async (message) => {
        outside.push(message.id); // not through tx: survives the rollback
      },
    });
    const transport = new LearningTransport({ consumer, visibilityTimeoutMs: 10 });
    await start(transport);
    transport.injectCrash('after-handler-before-commit');
    await transport.send([{ id: 'leaky', body }]);
    await transport.drain();
    expect(outside).toEqual(['leaky', 'leaky']);
  });

  it('applies exactly once on PGlite, with the effect in a Postgres table, through a crash before the commit and one after', async () => {
    const db = new Kysely<{ orders: { message_id: string } }>({ dialect: new PGliteDialect(new PGlite()) });
    try {
      const schema = 'inboxkit';
      await migrateInbox(db, { schema });
      await sql`CREATE TABLE orders (message_id text NOT NULL)`.execute(db);
      const consumer = idempotentConsumer<unknown, Transaction<{ orders: { message_id: string } }>>({
        name: 'orders',
        store: new PostgresInboxStore({ db, schema, pipelining: 'off' }),
        backoff: { initialDelayMs: 10, maxDelayMs: 40, jitter: 'none' },
        handler: async (message, { tx }) => {
          await tx.insertInto('orders').values({ message_id: message.id }).execute();
        },
      });
      const transport = new LearningTransport({ consumer, visibilityTimeoutMs: 10 });
      await start(transport);
      transport.injectCrash('after-handler-before-commit', { id: 'a' });
      transport.injectCrash('after-commit-before-ack', { id: 'b' });
      transport.injectCrash('before-handler', { id: 'c' });
      await transport.send(['a', 'b', 'c'].map((id) => ({ id, body })));
      transport.duplicate('a', 2);
      await transport.drain();
      const rows = await db.selectFrom('orders').select('message_id').orderBy('message_id').execute();
      expect(rows.map((r) => r.message_id)).toEqual(['a', 'b', 'c']);
      expect(transport.stats.crashes).toEqual({
        'before-handler': 1,
        'after-handler-before-commit': 1,
        'after-commit-before-ack': 1,
      });
    } finally {
      await db.destroy();
    }
  });

  it('dead-letters a message that crashes the process on every attempt after maxAttempts', async () => {
    const { store, consumer } = memoryConsumer({ maxAttempts: 3 });
    const transport = new LearningTransport({ consumer, visibilityTimeoutMs: 5 });
    await start(transport);
    transport.injectCrash('after-handler-before-commit', { id: 'poison', times: 10 });
    await transport.send([{ id: 'poison', body }]);
    await transport.drain();
    expect(store.countEffects(consumer.name, 'poison')).toBe(0);
    const [letter] = transport.deadLetters();
    expect(letter?.headers).toMatchObject({
      'x-inboxkit-reason': 'max-attempts',
      'x-inboxkit-original-id': 'poison',
    });
    expect(transport.stats.crashes['after-handler-before-commit']).toBe(3);
  });

  it('honours retry delays and passes a rising delivery count', async () => {
    const seen: number[] = [];
    const { store, consumer, recorder } = memoryConsumer({
      handler: async (message, { tx, attempt }) => {
        seen.push(attempt);
        if (attempt < 3) throw new RetryableError('busy', { delayMs: 30 });
        tx.stage(message.id);
      },
    });
    const transport = new LearningTransport({ consumer });
    await start(transport);
    await transport.send([{ id: 'r', body }]);
    const processed = await recorder.waitFor('r', 'processed');
    expect(seen).toEqual([1, 2, 3]);
    expect(recorder.events.map((e) => e.message.deliveryCount)).toEqual([1, 2, 3]);
    const [first, second] = recorder.events;
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(28);
    expect(processed.at - second!.at).toBeGreaterThanOrEqual(28);
    expect(store.countEffects(consumer.name, 'r')).toBe(1);
  });

  it('replays a dead letter once: reopened and processed, then a second replay is a duplicate', async () => {
    let broken = true;
    const { store, consumer, recorder } = memoryConsumer({
      handler: async (message, { tx }) => {
        if (broken) throw new PermanentError('rule 7');
        tx.stage(message.id);
      },
    });
    const transport = new LearningTransport({ consumer });
    await start(transport);
    await transport.send([{ id: 'p', body }]);
    await transport.drain();
    expect(transport.deadLetters()).toHaveLength(1);

    broken = false;
    expect((await transport.replayDeadLetters({ replayId: 'r1' })).replayed).toEqual(['p']);
    await transport.drain();
    expect(store.countEffects(consumer.name, 'p')).toBe(1);
    expect(transport.deadLetters()).toHaveLength(0);

    await transport.send([{ id: 'p', body, headers: { 'x-inboxkit-replay-id': 'r2' } }]);
    await transport.drain();
    expect(recorder.outcomes('p').map((o) => o.status)).toEqual(['dead-letter', 'processed', 'duplicate']);
    expect(store.countEffects(consumer.name, 'p')).toBe(1);
  });

  it('survives a crash of the whole process mid-handler: a new consumer applies the message once', async () => {
    const broker = new LearningBroker({ visibilityTimeoutMs: 20 });
    const store = new InMemoryInboxStore();
    const name = uniqueName('restart');
    let entered!: () => void;
    const inHandler = new Promise<void>((resolve) => (entered = resolve));
    let die!: (error: Error) => void;
    const dying = idempotentConsumer<unknown, InMemoryTransaction>({
      name,
      store,
      backoff: { initialDelayMs: 10, maxDelayMs: 10, jitter: 'none' },
      handler: async (message, { tx }) => {
        tx.stage(message.id);
        entered();
        await new Promise<void>((_, reject) => (die = reject));
      },
    });
    const first = new LearningTransport({ consumer: dying, broker });
    await start(first);
    await broker.send([{ id: 'm', body }]);
    await inHandler;
    broker.crash();
    die(new Error('process died: the transaction rolls back'));

    const recorder = new OutcomeRecorder();
    const survivor = idempotentConsumer<unknown, InMemoryTransaction>({
      name,
      store,
      backoff: { initialDelayMs: 10, maxDelayMs: 10, jitter: 'none' },
      handler: async (message, { tx }) => tx.stage(message.id),
      hooks: { onOutcome: recorder.hook },
    });
    await start(new LearningTransport({ consumer: survivor, broker }));
    await recorder.waitFor('m', 'processed');
    await broker.drain();
    expect(store.countEffects(name, 'm')).toBe(1);
    expect(broker.stats.processCrashes).toBe(1);
  });
});
