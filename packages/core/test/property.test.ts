// Test 5 of the issue: fast-check drives random interleavings of deliveries, duplicates, batches, handler
// failures and crashes against the in-memory store and the Postgres store on PGlite, and checks the invariant
// after every step: each id applied at most once; after the drain, exactly once unless dead-lettered.

import fc from 'fast-check';
import type { Kysely } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { PermanentError, RetryableError } from '../src/errors.js';
import { InMemoryInboxStore, type InMemoryTransaction } from '../src/memory/index.js';
import type { InboundMessage } from '../src/message.js';
import type { Outcome } from '../src/outcome.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import type { InboxStore } from '../src/store.js';
import { openPglite } from './support/pglite.js';
import { countEffects, insertEffect, type TestDB, type TestTx } from './support/postgres.js';

type Behaviour = 'ok' | 'retryable' | 'unknown' | 'permanent' | 'crash';

interface Delivery {
  readonly id: number;
  readonly behaviour: Behaviour;
  readonly viaBatch: boolean;
  readonly deliveryCount: number | undefined;
}

/** Thrown by the handler to stand for the process dying in the middle of it. */
class CrashSignal extends Error {
  override name = 'CrashSignal';
}

const delivery: fc.Arbitrary<Delivery> = fc.record({
  id: fc.integer({ min: 0, max: 5 }),
  behaviour: fc.constantFrom<Behaviour>('ok', 'ok', 'ok', 'retryable', 'unknown', 'permanent', 'crash', 'crash'),
  viaBatch: fc.boolean(),
  deliveryCount: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
});
/** Rounds of deliveries; the deliveries of a round run concurrently. */
const scenario = fc.array(fc.array(delivery, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 12 });

/**
 * The store as a crashing process sees it: when the handler "crashed", the failure is never recorded (the
 * process is gone), and a batch that contained a crash never commits.
 */
function crashing<Tx>(store: InboxStore<Tx>): InboxStore<Tx> {
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'recordFailure') {
        return async (...args: Parameters<InboxStore<Tx>['recordFailure']>) => {
          if (args[1].error.name === 'CrashSignal') throw new Error('process died');
          return target.recordFailure(...args);
        };
      }
      if (property === 'runTransactionalBatch') {
        return (...args: Parameters<InboxStore<Tx>['runTransactionalBatch']>) => {
          const [settings, requests, work, onFailure] = args;
          return target.runTransactionalBatch(settings, requests, work, (claimed, error, index) => {
            if (error instanceof CrashSignal) throw new Error('process died mid-batch');
            return onFailure(claimed, error, index);
          });
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

interface Harness<Tx> {
  readonly store: InboxStore<Tx>;
  apply(tx: Tx, consumer: string, id: string): Promise<void>;
  count(consumer: string, id: string): Promise<number>;
}

let run = 0;

async function check<Tx>(harness: Harness<Tx>, rounds: Delivery[][]): Promise<void> {
  const name = `prop-${++run}`;
  const store = crashing(harness.store);
  const consumer = idempotentConsumer<unknown, Tx>({
    name,
    store,
    maxAttempts: 4,
    backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
    handler: async (message, { tx }) => {
      await harness.apply(tx, name, message.id);
      switch (message.headers['behaviour'] as Behaviour) {
        case 'retryable':
          throw new RetryableError('try later');
        case 'unknown':
          throw new Error('something');
        case 'permanent':
          throw new PermanentError('never');
        case 'crash':
          throw new CrashSignal('process died');
        default:
      }
    },
  });
  const message = (d: Pick<Delivery, 'id' | 'behaviour' | 'deliveryCount'>): InboundMessage => ({
    id: `id-${d.id}`,
    body: JSON.stringify({ n: d.id }),
    headers: { behaviour: d.behaviour },
    source: { transport: 'property' },
    ...(d.deliveryCount !== undefined ? { deliveryCount: d.deliveryCount } : {}),
  });
  const processed = new Map<string, number>();
  const note = (outcomes: Outcome[]): void => {
    for (const o of outcomes) if (o.status === 'processed') processed.set(o.messageId, (processed.get(o.messageId) ?? 0) + 1);
  };
  const ids = [...new Set(rounds.flat().map((d) => `id-${d.id}`))];
  const assertAtMostOnce = async (): Promise<void> => {
    for (const id of ids) {
      const n = await harness.count(name, id);
      expect(n, `effects of ${id}`).toBeLessThanOrEqual(1);
      expect(processed.get(id) ?? 0, `processed outcomes of ${id}`).toBe(n);
    }
  };

  for (const round of rounds) {
    const batch = round.filter((d) => d.viaBatch).map(message);
    const singles = round.filter((d) => !d.viaBatch).map(message);
    const results = await Promise.all([
      batch.length > 0 ? consumer.handleBatch(batch) : Promise.resolve([]),
      ...singles.map((m) => consumer.handle(m).then((o) => [o])),
    ]);
    note(results.flat());
    await assertAtMostOnce();
  }

  // Drain: redeliver with a healthy handler until every id has a final answer.
  const final = new Map<string, Outcome>();
  for (const id of ids) {
    const n = Number(id.slice(3));
    for (let i = 0; i < 20; i++) {
      const outcome = await consumer.handle(message({ id: n, behaviour: 'ok', deliveryCount: undefined }));
      note([outcome]);
      if (outcome.status !== 'retry') {
        final.set(id, outcome);
        break;
      }
    }
    expect(final.get(id), `final outcome of ${id}`).toBeDefined();
  }
  await assertAtMostOnce();
  const rows = await harness.store.findRows(name, ids);
  for (const id of ids) {
    const row = rows.find((r) => r.messageId === id);
    const effects = await harness.count(name, id);
    if (final.get(id)!.status === 'dead-letter') {
      expect(row?.status, `row of ${id}`).toBe('dead_lettered');
      expect(effects, `effects of dead-lettered ${id}`).toBe(0);
    } else {
      expect(row?.status, `row of ${id}`).toBe('completed');
      expect(effects, `effects of completed ${id}`).toBe(1);
    }
  }
}

describe('random interleavings of deliveries, duplicates, failures and crashes', () => {
  it('apply each id at most once, and exactly once unless dead-lettered (in-memory store)', async () => {
    const store = new InMemoryInboxStore();
    const harness: Harness<InMemoryTransaction> = {
      store,
      apply: async (tx, _consumer, id) => tx.stage(id),
      count: async (consumer, id) => store.countEffects(consumer, id),
    };
    await fc.assert(
      fc.asyncProperty(scenario, (rounds) => check(harness, rounds)),
      { numRuns: 300 },
    );
  }, 300_000);

  let pglite: { db: Kysely<TestDB>; schema: string; close(): Promise<void> } | undefined;
  afterAll(async () => {
    await pglite?.close();
  });

  it('apply each id at most once, and exactly once unless dead-lettered (Postgres store on PGlite)', async () => {
    pglite = await openPglite('property');
    const { db, schema } = pglite;
    const harness: Harness<TestTx> = {
      store: new PostgresInboxStore({ db, schema }),
      apply: (tx, consumer, id) => insertEffect(tx, schema, consumer, id),
      count: (consumer, id) => countEffects(db, schema, consumer, id),
    };
    await fc.assert(
      fc.asyncProperty(scenario, (rounds) => check(harness, rounds)),
      { numRuns: 40 },
    );
  }, 300_000);
});
