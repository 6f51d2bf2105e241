// The partitioned layout gives one intent one day: the day comes from the intent's own time where the message
// carries one (CloudEvents `time`, the consumer's `dayOf`), and the cross-day check finds an id on the window's
// other days before the first effect — so a producer that re-publishes an intent as a new record stamped on the
// next day gets one effect, two deliveries stamped on different days at once get one effect, and a changed
// payload under the same id on another day is a payload-mismatch dead letter. Stamps are yesterday and today
// (both days have partitions from the migration), so the database clock need not move.

import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testMessage } from '../../../testing/src/store-conformance.js';
import type { IdempotentConsumerConfig } from '../../src/consumer-types.js';
import { attemptLedgerOf } from '../../src/delivery/attempt-ledger.js';
import { ConfigurationError } from '../../src/errors.js';
import { idempotentConsumer } from '../../src/idempotent-consumer.js';
import type { InboundMessage } from '../../src/message.js';
import type { Outcome } from '../../src/outcome.js';
import { PostgresInboxStore } from '../../src/postgres/index.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestDB, type TestTx } from '../support/postgres.js';

const DAY = 86_400_000;
const utcDay = (at: Date | number): string => new Date(at).toISOString().slice(0, 10);

describe('the partitioned layout, one day per intent', () => {
  let t: TestDatabase;
  let db: Kysely<TestDB>;
  let n = 0;
  beforeAll(async () => {
    t = await openTestDatabase('partition_intent_day', 12, 'daily-partitions');
    db = t.db;
  });
  afterAll(async () => {
    await t?.close();
  });

  const store = (crossDayCheck?: boolean) =>
    new PostgresInboxStore({ db, schema: t.schema, layout: 'daily-partitions', ...(crossDayCheck === undefined ? {} : { crossDayCheck }) });
  const consumer = (name: string, config: Partial<IdempotentConsumerConfig<{ id: string; v?: number; occurredAt?: string }, TestTx>> = {}, crossDayCheck?: boolean) =>
    idempotentConsumer<{ id: string; v?: number; occurredAt?: string }, TestTx>({
      name,
      store: store(crossDayCheck),
      handler: async (m, { tx }) => {
        await insertEffect(tx, t.schema, name, m.id);
      },
      ...config,
    });
  const message = (id: string, timestamp: Date, payload: object = { id }, headers: Record<string, string> = {}): InboundMessage =>
    testMessage(id, payload, { timestamp, headers });
  const name = (label: string) => `${label}-${++n}`;
  /** The days holding rows of `id`. */
  const days = async (consumerName: string, id: string): Promise<string[]> => {
    const rows = await t.pool.query(`SELECT day::text AS day FROM "${t.schema}".inbox WHERE consumer = $1 AND message_id = $2 ORDER BY day`, [
      consumerName,
      id,
    ]);
    return rows.rows.map((r: { day: string }) => r.day);
  };
  /** Yesterday just before midnight, and the re-publish after it (a new record: a new broker timestamp). */
  const yesterday = () => new Date(`${utcDay(Date.now() - DAY)}T23:59:59.000Z`);
  const today = () => new Date(`${utcDay(Date.now())}T00:00:01.000Z`);

  it('runs an intent re-published as a new record on the next UTC day once', async () => {
    const c = name('republished');
    expect(await consumer(c).handle(message('order-1', yesterday()))).toMatchObject({ status: 'processed' });
    expect(await consumer(c).handle(message('order-1', today()))).toMatchObject({ status: 'duplicate' });
    expect(await countEffects(db, t.schema, c, 'order-1')).toBe(1);
    expect(await days(c, 'order-1')).toEqual([utcDay(yesterday())]);
  });

  it('runs it twice with the cross-day check off: the limit the option trades for its cost', async () => {
    const c = name('unchecked');
    expect(await consumer(c, {}, false).handle(message('order-1', yesterday()))).toMatchObject({ status: 'processed' });
    expect(await consumer(c, {}, false).handle(message('order-1', today()))).toMatchObject({ status: 'processed' });
    expect(await countEffects(db, t.schema, c, 'order-1')).toBe(2);
  });

  it('dead-letters a changed payload under the same id on another day as payload-mismatch', async () => {
    const c = name('changed');
    expect(await consumer(c).handle(message('order-1', yesterday(), { id: 'order-1', v: 1 }))).toMatchObject({ status: 'processed' });
    expect(await consumer(c).handle(message('order-1', today(), { id: 'order-1', v: 2 }))).toMatchObject({
      status: 'dead-letter',
      reason: 'payload-mismatch',
    });
    expect(await countEffects(db, t.schema, c, 'order-1')).toBe(1);
    expect(await days(c, 'order-1')).toEqual([utcDay(yesterday())]);
  });

  it('keeps every record of an id on its first row: a retry stamped on the next day, and an attempt recorded as started', async () => {
    const c = name('bookkeeping');
    let failing = true;
    const flaky = consumer(c, {
      backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
      handler: async (m, { tx }) => {
        if (failing) throw new Error('the ledger is down');
        await insertEffect(tx, t.schema, c, m.id);
      },
    });
    expect(await flaky.handle(message('retry-1', yesterday()))).toMatchObject({ status: 'retry', attempt: 1 });
    // The failure of an attempt stamped on the next day is recorded on the first day's row too.
    expect(await flaky.handle(message('retry-1', today()))).toMatchObject({ status: 'retry', attempt: 2 });
    expect(await days(c, 'retry-1')).toEqual([utcDay(yesterday())]);
    failing = false;
    expect(await flaky.handle(message('retry-1', today()))).toMatchObject({ status: 'processed', attempt: 3 });
    expect(await days(c, 'retry-1')).toEqual([utcDay(yesterday())]);
    // A transport records the attempt of a redelivery as started before it runs (SQS, quorum queues): the
    // record must land on the completed row's day, or the claim would take its new `processing` row over.
    expect(await consumer(c).handle(message('started-1', yesterday()))).toMatchObject({ status: 'processed' });
    const later = consumer(c);
    await attemptLedgerOf(later)!.recordAttemptsStarted([message('started-1', today())]);
    expect(await later.handle(message('started-1', today()))).toMatchObject({ status: 'duplicate' });
    expect(await days(c, 'started-1')).toEqual([utcDay(yesterday())]);
    expect(await countEffects(db, t.schema, c, 'started-1')).toBe(1);
  });

  it('runs each id once when two deliveries stamped on different days arrive at once, one by one and in batches', async () => {
    const c = name('race');
    const ids = Array.from({ length: 40 }, (_, i) => `race-${i}`);
    const a = consumer(c);
    const b = consumer(c);
    const outcomes = await Promise.all(
      ids.flatMap((id) => [a.handle(message(id, yesterday())), b.handle(message(id, today()))]),
    );
    // Batches of the same ids on the two days, at once: the batch claim takes the same locks in id order.
    const batchIds = Array.from({ length: 40 }, (_, i) => `batch-${i}`);
    const batches = await Promise.all([
      a.handleBatch(batchIds.map((id) => message(id, yesterday()))),
      b.handleBatch(batchIds.map((id) => message(id, today()))),
    ]);
    const all: Outcome[] = [...outcomes, ...batches.flat()];
    // A lost race may answer retry (lock-timeout, contended): its redelivery must then be a duplicate.
    for (const [i, outcome] of all.entries()) {
      if (outcome.status !== 'retry') continue;
      const id = i < outcomes.length ? ids[Math.floor(i / 2)]! : batchIds[(i - outcomes.length) % batchIds.length]!;
      expect(await a.handle(message(id, today()))).toMatchObject({ status: 'duplicate' });
    }
    expect(all.filter((o) => o.status === 'processed')).toHaveLength(ids.length + batchIds.length);
    for (const id of [...ids, ...batchIds]) {
      expect({ id, effects: await countEffects(db, t.schema, c, id) }).toEqual({ id, effects: 1 });
      expect((await days(c, id)).length).toBe(1);
    }
  });

  it('takes the day from the CloudEvents time header, whatever the broker stamped', async () => {
    // With the check off, only the header can put both records of the intent on one day.
    const c = name('cloudevents');
    const time = `${utcDay(Date.now() - 2 * DAY)}T12:00:00Z`;
    expect(await consumer(c, {}, false).handle(message('ce-1', yesterday(), { id: 'ce-1' }, { ce_time: time }))).toMatchObject({ status: 'processed' });
    expect(await consumer(c, {}, false).handle(message('ce-1', today(), { id: 'ce-1' }, { 'ce-time': time }))).toMatchObject({ status: 'duplicate' });
    expect(await countEffects(db, t.schema, c, 'ce-1')).toBe(1);
    expect(await days(c, 'ce-1')).toEqual([utcDay(Date.now() - 2 * DAY)]);
    // An unreadable time is no time: the broker timestamp decides, as without the header.
    expect(await consumer(c, {}, false).handle(message('ce-2', yesterday(), { id: 'ce-2' }, { ce_time: 'yesterday' }))).toMatchObject({
      status: 'processed',
    });
    expect(await days(c, 'ce-2')).toEqual([utcDay(yesterday())]);
  });

  it("takes the day from the consumer's dayOf, and dead-letters a message it cannot date as schema-invalid", async () => {
    const c = name('day-of');
    const occurredAt = `${utcDay(Date.now() - 3 * DAY)}T08:00:00.000Z`;
    const dated = consumer(c, { dayOf: (m) => (m.payload.occurredAt === undefined ? undefined : new Date(m.payload.occurredAt)) }, false);
    expect(await dated.handle(message('d-1', yesterday(), { id: 'd-1', occurredAt }))).toMatchObject({ status: 'processed' });
    expect(await dated.handle(message('d-1', today(), { id: 'd-1', occurredAt }))).toMatchObject({ status: 'duplicate' });
    expect(await days(c, 'd-1')).toEqual([occurredAt.slice(0, 10)]);
    // `undefined`: the message carries no time, the broker timestamp decides.
    expect(await dated.handle(message('d-2', yesterday()))).toMatchObject({ status: 'processed' });
    expect(await days(c, 'd-2')).toEqual([utcDay(yesterday())]);
    const bad = await dated.handle(message('d-3', yesterday(), { id: 'd-3', occurredAt: 'soon' }));
    expect(bad).toMatchObject({ status: 'dead-letter', reason: 'schema-invalid' });
    expect(bad.status === 'dead-letter' ? bad.error?.message : '').toContain('dayOf must answer a valid Date or undefined, got an invalid Date');
    expect(await countEffects(db, t.schema, c, 'd-3')).toBe(0);
    expect(() => consumer(c, { dayOf: 'occurredAt' as never })).toThrow(ConfigurationError);
    expect(() => store('yes' as never)).toThrow(ConfigurationError);
  });
});
