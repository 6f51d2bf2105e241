// Advisory-lock claims on real Postgres: two concurrent imports of one tenant never overlap, other tenants run
// beside them, a wait is bounded (a busy lock becomes a retry), and a timed-out wait leaves the transaction
// usable with its lock_timeout unchanged.

import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idempotentConsumer } from '../../src/idempotent-consumer.js';
import { advisoryLock, AdvisoryLockBusyError, tryAdvisoryLock } from '../../src/patterns/index.js';
import { PostgresInboxStore } from '../../src/postgres/index.js';
import { openTestDatabase, type TestDatabase, type TestDB, type TestTx } from '../support/postgres.js';

/** Counts how many imports of each tenant run at the same moment, and the most ever seen. */
class Overlap {
  readonly #running = new Map<string, number>();
  max = 0;
  enter(tenant: string): void {
    const n = (this.#running.get(tenant) ?? 0) + 1;
    this.#running.set(tenant, n);
    this.max = Math.max(this.max, n);
  }
  leave(tenant: string): void {
    this.#running.set(tenant, (this.#running.get(tenant) ?? 1) - 1);
  }
}

describe('advisory-lock claims', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('advisory_lock', 12);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('runs two concurrent imports of one tenant one after the other', async () => {
    const overlap = new Overlap();
    const importFile = (db: Kysely<TestDB>, tenant: string) =>
      db.transaction().execute(async (tx) => {
        await advisoryLock(tx, { key: ['import', tenant], waitMs: 5_000 });
        overlap.enter(tenant);
        await sleep(150); // the import's work, long enough for the other to arrive
        overlap.leave(tenant);
      });
    const started = performance.now();
    await Promise.all([importFile(t.db, 'acme'), importFile(t.db, 'acme')]);
    expect(overlap.max).toBe(1);
    // The second waited for the first (it did not fail): the two took at least two imports' time.
    expect(performance.now() - started).toBeGreaterThanOrEqual(280);
  });

  it('lets imports of different tenants run at the same time', async () => {
    const running = new Set<string>();
    let together = 0;
    await Promise.all(
      ['t1', 't2'].map((tenant) =>
        t.db.transaction().execute(async (tx) => {
          expect((await tryAdvisoryLock(tx, { key: ['import', tenant], waitMs: 0 })).acquired).toBe(true);
          running.add(tenant);
          await sleep(100);
          together = Math.max(together, running.size);
          running.delete(tenant);
        }),
      ),
    );
    expect(together).toBe(2);
  });

  it('gives up after waitMs, leaving the transaction usable and lock_timeout as it was', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = t.db.transaction().execute(async (tx) => {
      await advisoryLock(tx, { key: 'nightly-rebuild' });
      locked();
      await held;
    });
    await isLocked;
    try {
      await t.db.transaction().execute(async (tx) => {
        await sql`SET LOCAL lock_timeout = '7s'`.execute(tx);
        const result = await tryAdvisoryLock(tx, { key: 'nightly-rebuild', waitMs: 150 });
        expect(result.acquired).toBe(false);
        expect(result.waitedMs).toBeGreaterThanOrEqual(140);
        expect(result.waitedMs).toBeLessThan(3_000);
        // Still usable, setting untouched.
        const setting = await sql<{ lock_timeout: string }>`SHOW lock_timeout`.execute(tx);
        expect(setting.rows[0]!.lock_timeout).toBe('7s');
        await expect(
          advisoryLock(tx, { key: 'nightly-rebuild', waitMs: 0, retryDelayMs: 2_000 }),
        ).rejects.toSatisfy(
          (e) =>
            e instanceof AdvisoryLockBusyError &&
            e.retriable &&
            e.delayMs === 2_000 &&
            e.code === 'ADVISORY_LOCK_BUSY',
        );
      });
    } finally {
      release();
      await holder;
    }
    // Released by the holder's COMMIT: free again.
    await t.db.transaction().execute(async (tx) => {
      expect((await tryAdvisoryLock(tx, { key: 'nightly-rebuild', waitMs: 0 })).acquired).toBe(true);
    });
  });

  it('retries the second of two concurrent imports of one tenant through the consumer, and applies both once', async () => {
    const store = new PostgresInboxStore({ db: t.db, schema: t.schema });
    const overlap = new Overlap();
    const consumer = idempotentConsumer<{ tenant: string }, TestTx>({
      name: 'tenant-imports',
      store,
      backoff: { initialDelayMs: 10, jitter: 'none' },
      handler: async (m, { tx }) => {
        await advisoryLock(tx, { key: ['import', m.payload.tenant], waitMs: 50 });
        overlap.enter(m.payload.tenant);
        await sleep(300);
        overlap.leave(m.payload.tenant);
      },
    });
    const delivery = (id: string) => ({
      id,
      body: JSON.stringify({ tenant: 'globex' }),
      headers: {},
      source: { transport: 'memory' as const },
    });
    const [a, b] = await Promise.all([
      consumer.handle(delivery('import-1')),
      consumer.handle(delivery('import-2')),
    ]);
    expect([a.status, b.status].sort()).toEqual(['processed', 'retry']);
    const retried = a.status === 'retry' ? a : b;
    expect(retried.status === 'retry' && retried.error?.name).toBe('AdvisoryLockBusyError');
    // The retry, once the first import committed.
    expect((await consumer.handle(delivery(retried.messageId!))).status).toBe('processed');
    expect(overlap.max).toBe(1);
  });
});
