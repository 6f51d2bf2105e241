// startOutboxRelay(): publishes every committed row once confirmed, keeps per-key order, is safe with several
// relays, survives a broker outage without loss, parks past the horizon, prunes, and wakes on NOTIFY.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueue, startOutboxRelay, type OutboxRelay } from '../src/index.js';
import { openOutboxDb, recordingPublisher, waitFor, type OutboxTestDb } from './support.js';

describe('startOutboxRelay', () => {
  let t: OutboxTestDb;
  let opts: { schema: string };
  const relays: OutboxRelay[] = [];
  beforeAll(async () => {
    t = await openOutboxDb('outbox_relay');
    opts = { schema: t.schema.schema };
  });
  afterAll(async () => {
    await Promise.all(relays.map((r) => r.stop()));
    await t?.close();
  });

  async function enqueueMany(count: number, keyOf: (i: number) => string | undefined, destination: string): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 25) {
      await t.db.transaction().execute(async (tx) => {
        for (let j = i; j < Math.min(count, i + 25); j++) {
          const key = keyOf(j);
          ids.push(await enqueue(tx, { destination, body: String(j), ...(key === undefined ? {} : { key }) }, opts));
        }
      });
    }
    return ids;
  }

  it('publishes each row once, in order per key, and marks it dispatched', async () => {
    const publisher = recordingPublisher();
    const ids = await enqueueMany(200, (i) => `k${i % 5}`, 'ordered');
    const relay = startOutboxRelay({ db: t.db, publishers: { default: publisher }, pollIntervalMs: 20, ...opts });
    relays.push(relay);
    await waitFor(() => publisher.published.length >= 200);
    await relay.stop();
    expect(publisher.published.map((m) => m.id).sort()).toEqual([...ids].sort());
    for (let k = 0; k < 5; k++) {
      const bodies = publisher.published.filter((m) => m.key === `k${k}`).map((m) => Number(m.body));
      expect(bodies).toEqual([...bodies].sort((a, b) => a - b));
    }
    expect(await t.backlog()).toBe(0);
  });

  it('takes several rows of a key per claim with rowsPerKey, still in order', async () => {
    const publisher = recordingPublisher();
    const ids = await enqueueMany(200, (i) => `r${i % 4}`, 'per-key');
    const two = [0, 1].map(() =>
      startOutboxRelay({ db: t.db, publishers: { default: publisher }, pollIntervalMs: 10, rowsPerKey: 10, batchSize: 3, ...opts }),
    );
    relays.push(...two);
    await waitFor(() => publisher.published.length >= 200);
    await Promise.all(two.map((r) => r.stop()));
    expect(publisher.published.map((m) => m.id).sort()).toEqual([...ids].sort());
    for (let k = 0; k < 4; k++) {
      expect(publisher.published.filter((m) => m.key === `r${k}`).map((m) => m.id)).toEqual(ids.filter((_, i) => i % 4 === k));
    }
  });

  it('with four relays in parallel publishes every row exactly once', async () => {
    const publisher = recordingPublisher();
    const ids = await enqueueMany(400, (i) => (i % 2 === 0 ? undefined : `p${i % 7}`), 'parallel');
    const four = Array.from({ length: 4 }, () =>
      startOutboxRelay({ db: t.db, publishers: { default: publisher }, pollIntervalMs: 10, batchSize: 20, ...opts }),
    );
    relays.push(...four);
    await waitFor(() => publisher.published.length >= 400);
    await Promise.all(four.map((r) => r.stop()));
    const published = publisher.published.map((m) => m.id);
    expect(new Set(published).size).toBe(published.length);
    expect(published.sort()).toEqual([...ids].sort());
    for (let k = 0; k < 7; k++) {
      const bodies = publisher.published.filter((m) => m.key === `p${k}`).map((m) => Number(m.body));
      expect(bodies).toEqual([...bodies].sort((a, b) => a - b));
    }
  });

  it('keeps every row while the broker is down, and drains when it returns', async () => {
    const publisher = recordingPublisher();
    publisher.failing = true;
    const relay = startOutboxRelay({
      db: t.db,
      publishers: { default: publisher },
      pollIntervalMs: 10,
      backoff: { initialDelayMs: 10, maxDelayMs: 50 },
      ...opts,
    });
    relays.push(relay);
    const first = await enqueueMany(30, (i) => `o${i % 3}`, 'outage');
    // The head row of each key has failed at least twice: the outage is under way.
    await waitFor(async () => {
      const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM ${sql.raw(`"${opts.schema}"."outbox"`)}
        WHERE destination = 'outage' AND attempts >= 2`.execute(t.db);
      return Number(rows[0]?.n) >= 3;
    });
    expect(publisher.published).toEqual([]);
    const second = await enqueueMany(30, (i) => `o${i % 3}`, 'outage');
    expect(await t.backlog()).toBe(60);
    publisher.failing = false;
    await waitFor(() => publisher.published.length >= 60);
    await relay.stop();
    expect(publisher.published.map((m) => m.id).sort()).toEqual([...first, ...second].sort());
    for (let k = 0; k < 3; k++) {
      const ids = publisher.published.filter((m) => m.key === `o${k}`).map((m) => m.id);
      expect(ids).toEqual([...first, ...second].filter((_, i) => i % 30 % 3 === k));
    }
    expect(await t.backlog()).toBe(0);
  });

  it('parks a row that fails past the horizon, with its error, and never deletes it', async () => {
    const publisher = recordingPublisher();
    publisher.failing = true;
    const [id] = await enqueueMany(1, () => undefined, 'parked');
    const relay = startOutboxRelay({
      db: t.db,
      publishers: { default: publisher },
      pollIntervalMs: 10,
      parkAfterMs: 1,
      backoff: { initialDelayMs: 1, maxDelayMs: 1 },
      ...opts,
    });
    relays.push(relay);
    await waitFor(async () => {
      const { rows } = await sql<{ parked_at: Date | null }>`SELECT parked_at FROM ${sql.raw(`"${opts.schema}"."outbox"`)} WHERE id = ${id!}`.execute(t.db);
      return rows[0]?.parked_at != null;
    });
    await relay.stop();
    const { rows } = await sql<{ last_error: string; attempts: number }>`SELECT last_error, attempts FROM ${sql.raw(`"${opts.schema}"."outbox"`)} WHERE id = ${id!}`.execute(t.db);
    expect(rows[0]?.last_error).toContain('broker unavailable');
    expect(rows[0]?.attempts).toBeGreaterThanOrEqual(1);
  });

  it('sends a row with an unknown publisher name to retry, not to the wrong broker', async () => {
    const publisher = recordingPublisher();
    const id = await t.db.transaction().execute((tx) => enqueue(tx, { publisher: 'nope', destination: 'unknown', body: 'x' }, opts));
    const relay = startOutboxRelay({ db: t.db, publishers: { default: publisher }, pollIntervalMs: 10, ...opts });
    relays.push(relay);
    await waitFor(async () => {
      const { rows } = await sql<{ last_error: string | null }>`SELECT last_error FROM ${sql.raw(`"${opts.schema}"."outbox"`)} WHERE id = ${id}`.execute(t.db);
      return rows[0]?.last_error != null;
    });
    await relay.stop();
    expect(publisher.published.map((m) => m.id)).not.toContain(id);
    await sql`DELETE FROM ${sql.raw(`"${opts.schema}"."outbox"`)} WHERE id = ${id}`.execute(t.db);
  });

  it('prunes dispatched rows after the retention', async () => {
    const publisher = recordingPublisher();
    await enqueueMany(5, () => undefined, 'pruned');
    const relay = startOutboxRelay({ db: t.db, publishers: { default: publisher }, pollIntervalMs: 10, retentionMs: 1, pruneIntervalMs: 1, ...opts });
    relays.push(relay);
    await waitFor(async () => {
      const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM ${sql.raw(`"${opts.schema}"."outbox"`)} WHERE dispatched_at IS NOT NULL`.execute(t.db);
      return publisher.published.length >= 5 && Number(rows[0]?.n) === 0;
    });
    await relay.stop();
    const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM ${sql.raw(`"${opts.schema}"."outbox"`)} WHERE parked_at IS NOT NULL`.execute(t.db);
    expect(Number(rows[0]?.n)).toBe(1);
  });

  it('survives the loss of its LISTEN connection, and listens again', async () => {
    const publisher = recordingPublisher();
    const relay = startOutboxRelay({ db: t.db, publishers: { default: publisher }, pollIntervalMs: 50, listen: t.schema.pool, ...opts });
    relays.push(relay);
    const listeners = async () => {
      const { rows } = await sql<{ pid: number }>`SELECT l.pid FROM pg_stat_activity l
        WHERE l.query = ${`LISTEN "${opts.schema}.outbox"`} AND l.pid <> pg_backend_pid()`.execute(t.db);
      return rows.map((r) => r.pid);
    };
    await waitFor(async () => (await listeners()).length > 0);
    const [first] = await listeners();
    await sql`SELECT pg_terminate_backend(${first!})`.execute(t.db);
    await waitFor(async () => (await listeners()).some((pid) => pid !== first));
    const id = await t.db.transaction().execute((tx) => enqueue(tx, { destination: 'relisten', body: 'x' }, opts));
    await waitFor(() => publisher.published.some((m) => m.id === id));
    await relay.stop();
  });

  it('wakes on NOTIFY at commit without waiting for the poll', async () => {
    const publisher = recordingPublisher();
    const relay = startOutboxRelay({ db: t.db, publishers: { default: publisher }, pollIntervalMs: 60_000, listen: t.schema.pool, ...opts });
    relays.push(relay);
    await new Promise((resolve) => setTimeout(resolve, 300)); // let the first (empty) cycle go to sleep
    const started = Date.now();
    const id = await t.db.transaction().execute((tx) => enqueue(tx, { destination: 'notified', body: 'x' }, opts));
    await waitFor(() => publisher.published.some((m) => m.id === id), 10_000);
    expect(Date.now() - started).toBeLessThan(5_000);
    await relay.stop();
  });

  it('with concurrency 4 in one relay publishes every row exactly once, in order per key, over one LISTEN connection', async () => {
    const publisher = recordingPublisher();
    const ids = await enqueueMany(400, (i) => (i % 2 === 0 ? undefined : `c${i % 7}`), 'concurrent');
    const relay = startOutboxRelay({
      db: t.db,
      publishers: { default: publisher },
      concurrency: 4,
      rowsPerKey: 3,
      pollIntervalMs: 60_000,
      batchSize: 20,
      listen: t.schema.pool,
      ...opts,
    });
    relays.push(relay);
    await waitFor(() => publisher.published.length >= 400);
    // Asleep now (a 60 s poll): a commit wakes it through the one LISTEN connection the four loops share.
    const late = await t.db.transaction().execute((tx) => enqueue(tx, { destination: 'concurrent', key: 'c1', body: '400' }, opts));
    await waitFor(() => publisher.published.some((m) => m.id === late), 10_000);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE query = ${`LISTEN "${opts.schema}.outbox"`}`.execute(t.db);
    expect(rows[0]!.n).toBe(1);
    await relay.stop();
    const published = publisher.published.map((m) => m.id);
    expect(new Set(published).size).toBe(published.length);
    expect(published.sort()).toEqual([...ids, late].sort());
    for (let k = 0; k < 7; k++) {
      const bodies = publisher.published.filter((m) => m.key === `c${k}`).map((m) => Number(m.body));
      expect(bodies).toEqual([...bodies].sort((a, b) => a - b));
    }
  });

  it('refuses a concurrency that is not a positive integer', () => {
    expect(() => startOutboxRelay({ db: t.db, publishers: { default: recordingPublisher() }, concurrency: 1.5, ...opts })).toThrow(/concurrency/);
  });
});
