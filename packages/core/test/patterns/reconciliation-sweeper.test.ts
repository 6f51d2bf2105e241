// The reconciliation sweeper on real Postgres: a downstream charge with no local record is found, kept open
// (and counted by the gauge) until it is repaired or reconciled, the watermark moves on without hiding it, and
// two sweepers of one name never sweep at the same time.

import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Attributes, MeterProvider, ObservableResult } from '@opentelemetry/api';
import {
  migrateReconciliation,
  reconciliationSweeper,
  type RemoteOperation,
} from '../../src/patterns/index.js';
import { openTestDatabase, type TestDatabase } from '../support/postgres.js';

interface Charge extends RemoteOperation {
  readonly amountCents: number;
}

describe('reconciliationSweeper', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('reconciliation');
    await migrateReconciliation(t.db, { schema: t.schema });
    await sql
      .raw(`CREATE TABLE "${t.schema}".payments (payment_id text PRIMARY KEY, amount_cents integer NOT NULL)`)
      .execute(t.db);
  });
  afterAll(async () => {
    await t?.close();
  });

  const addPayment = (id: string, cents: number) =>
    sql.raw(`INSERT INTO "${t.schema}".payments VALUES ('${id}', ${cents})`).execute(t.db);
  const ago = (ms: number) => new Date(Date.now() - ms);

  function sweeperOver(
    charges: Charge[],
    name: string,
    extra: Partial<Parameters<typeof reconciliationSweeper<Charge, { amount_cents: number }, never>>[0]> = {},
  ) {
    return reconciliationSweeper<Charge, { amount_cents: number }, typeof t.db>({
      name,
      db: t.db,
      schema: t.schema,
      settleMs: 1_000,
      overlapMs: 60_000,
      listRemote: async ({ since, until }) => charges.filter((c) => c.at >= since && c.at < until),
      findLocal: async (tx, ops) => {
        const rows = await sql<{
          payment_id: string;
          amount_cents: number;
        }>`SELECT payment_id, amount_cents FROM ${sql.table(`${t.schema}.payments`)} WHERE payment_id = ANY(${ops.map((o) => o.key)})`.execute(
          tx,
        );
        return new Map(rows.rows.map((r) => [r.payment_id, { amount_cents: r.amount_cents }]));
      },
      compare: (op, local) =>
        op.amountCents === local.amount_cents
          ? undefined
          : `amount ${op.amountCents} ≠ local ${local.amount_cents}`,
      ...(extra as object),
    });
  }

  it('reports a downstream charge with no local record, and keeps it open after the watermark moves on', async () => {
    await addPayment('p-1', 500);
    await addPayment('p-3', 700);
    const charges: Charge[] = [
      { key: 'p-1', at: ago(10_000), amountCents: 500 },
      { key: 'p-2', at: ago(9_000), amountCents: 900 }, // charged, never recorded: the orphan
      { key: 'p-3', at: ago(8_000), amountCents: 750 }, // recorded with another amount
      { key: 'p-4', at: ago(100), amountCents: 100 }, // too young: the next sweep's
    ];
    const sweeper = sweeperOver(charges, 'provider-a');
    const first = await sweeper.sweep();
    expect(first.status).toBe('swept');
    expect(first.listed).toBe(3);
    expect(first.differences.map((d) => [d.kind, d.operation.key, d.detail]).sort()).toEqual([
      ['mismatch', 'p-3', 'amount 750 ≠ local 700'],
      ['missing-local', 'p-2', undefined],
    ]);
    expect(first.unreconciled).toBe(2);
    // The next sweep's window starts after the watermark, minus the overlap: p-2 is no longer listed by the
    // downstream (it is older than the window), yet it stays open, rechecked from the differences table.
    charges.splice(0, 3);
    const second = await sweeper.sweep();
    expect(second.since.getTime()).toBeGreaterThan(first.since.getTime());
    expect(second.unreconciled).toBe(2);
    expect(second.differences.map((d) => [d.operation.key, d.known]).sort()).toEqual([
      ['p-2', true],
      ['p-3', true],
    ]);
    expect((await sweeper.openDifferences()).map((d) => d.key).sort()).toEqual(['p-2', 'p-3']);
    // A local record appears (a late commit) and an operator resolves the other by hand.
    await addPayment('p-2', 900);
    expect(await sweeper.resolve('p-3', 'refunded 50 cents by hand')).toBe(true);
    const third = await sweeper.sweep();
    expect(third.reconciled).toBe(1);
    expect(third.unreconciled).toBe(0);
  });

  it('repairs differences when given repair, in the sweep transaction, and leaves failed repairs open', async () => {
    const charges: Charge[] = [
      { key: 'r-1', at: ago(5_000), amountCents: 100 },
      { key: 'r-2', at: ago(5_000), amountCents: 200 },
    ];
    const sweeper = sweeperOver(charges, 'provider-b', {
      repair: async (tx: typeof t.db, difference: { operation: Charge }) => {
        if (difference.operation.key === 'r-2') {
          await sql.raw(`INSERT INTO "${t.schema}".payments VALUES ('r-2-partial', 1)`).execute(tx);
          throw new Error('the provider API refused');
        }
        await sql
          .raw(
            `INSERT INTO "${t.schema}".payments VALUES ('${difference.operation.key}', ${difference.operation.amountCents})`,
          )
          .execute(tx);
      },
    });
    const report = await sweeper.sweep();
    expect(report.repaired).toBe(1);
    expect(report.differences.map((d) => d.operation.key)).toEqual(['r-2']);
    expect(report.unreconciled).toBe(1);
    const rows = await sql<{
      payment_id: string;
    }>`SELECT payment_id FROM ${sql.table(`${t.schema}.payments`)} WHERE payment_id LIKE 'r-%' ORDER BY 1`.execute(
      t.db,
    );
    // The failed repair's partial write rolled back with its savepoint.
    expect(rows.rows.map((r) => r.payment_id)).toEqual(['r-1']);
  });

  it('exports the open differences as the unreconciled gauge', async () => {
    // A MeterProvider that keeps the gauge callbacks and counter sums, read the way an SDK would.
    const callbacks = new Map<string, ((result: ObservableResult) => void)[]>();
    const counted: { name: string; value: number; attributes: Attributes | undefined }[] = [];
    const provider = {
      getMeter: () => ({
        createCounter: (name: string) => ({
          add: (value: number, attributes?: Attributes) => counted.push({ name, value, attributes }),
        }),
        createObservableGauge: (name: string) => ({
          addCallback: (cb: (result: ObservableResult) => void) =>
            callbacks.set(name, [...(callbacks.get(name) ?? []), cb]),
        }),
      }),
    } as unknown as MeterProvider;
    const observe = () => {
      const seen = new Map<string, number>();
      for (const cb of callbacks.get('inboxkit.reconciliation.unreconciled') ?? [])
        cb({ observe: (v: number, a?: Attributes) => seen.set(String(a?.['sweeper']), v) });
      return seen;
    };
    const sweeper = sweeperOver([{ key: 'g-1', at: ago(5_000), amountCents: 1 }], 'provider-c', {
      meterProvider: provider,
    });
    await sweeper.sweep();
    expect(observe().get('provider-c')).toBe(1);
    expect(counted.filter((c) => c.name === 'inboxkit.reconciliation.differences_found')).toEqual([
      {
        name: 'inboxkit.reconciliation.differences_found',
        value: 1,
        attributes: { sweeper: 'provider-c', kind: 'missing-local' },
      },
    ]);
    await sweeper.resolve('g-1', 'written off');
    expect(observe().get('provider-c')).toBe(0);
  });

  it('lets one of two concurrent sweeps of a name run; the other reports locked', async () => {
    let enter!: () => void;
    const inside = new Promise<void>((resolve) => (enter = resolve));
    let leave!: () => void;
    const gate = new Promise<void>((resolve) => (leave = resolve));
    const charges: Charge[] = [{ key: 'l-1', at: ago(5_000), amountCents: 1 }];
    const slow = sweeperOver(charges, 'provider-d', {
      findLocal: async () => {
        enter();
        await gate;
        return new Map();
      },
    });
    const fast = sweeperOver(charges, 'provider-d');
    const first = slow.sweep();
    await inside;
    const second = await fast.sweep();
    leave();
    expect(second.status).toBe('locked');
    expect((await first).status).toBe('swept');
  });
});
