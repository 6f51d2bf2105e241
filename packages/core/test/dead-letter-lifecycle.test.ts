// The lifecycle of dead letters on real Postgres, in both layouts: discard (one id, a reason group) and archive,
// each audited in the same statement as the row's new state; a discarded or archived id delivered again is a
// duplicate (counted under the act's name) and never runs; the retention pruner deletes retired rows and keeps
// live dead letters and the audit; the aggregate reads and the one-row acts (edit and retry, forget) join a
// row's details on its whole key (the `day` too);
// a dead letter moved to the default partition by a dropped day stays in the lifecycle.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testMessage } from '../../testing/src/store-conformance.js';
import { recordingMeterProvider } from '../../../test/support/recording-meter-provider.js';
import { METRIC_NAMES } from '../src/consumer-metrics.js';
import { PermanentError, StoreUnavailableError } from '../src/errors.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { parseOperatorAudit } from '../src/operator-audit.js';
import { replayDecision } from '../src/replay-decision.js';
import { PostgresInboxStore, type InboxLayout, type RetireDeadLettersRequest } from '../src/postgres/index.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestTx } from './support/postgres.js';

for (const layout of ['table', 'daily-partitions'] as const satisfies readonly InboxLayout[]) {
  describe(`dead-letter lifecycle (${layout})`, () => {
    let t: TestDatabase;
    beforeAll(async () => {
      t = await openTestDatabase(`lifecycle_${layout === 'table' ? 'plain' : 'daily'}`, 4, layout);
    });
    afterAll(async () => {
      await t?.close();
    });

    const store = () => new PostgresInboxStore({ db: t.db, schema: t.schema, layout });
    const stamped = new Date();
    /** A consumer whose handler dead-letters ids starting `bad` (permanent) and `odd` (max attempts), applies the rest. */
    const consumer = (name: string, meterProvider?: ReturnType<typeof recordingMeterProvider>['provider']) =>
      idempotentConsumer<unknown, TestTx>({
        name,
        store: store(),
        maxAttempts: 1,
        ...(meterProvider === undefined ? {} : { meterProvider }),
        handler: async (m, { tx }) => {
          if (m.id?.startsWith('bad') === true) throw new PermanentError('card declined');
          if (m.id?.startsWith('odd') === true) throw new Error('the provider timed out');
          await insertEffect(tx, t.schema, name, m.id);
        },
      });
    const message = (id: string) => testMessage(id, { id }, { timestamp: stamped });
    const act = (c: string, extra: Partial<RetireDeadLettersRequest>): RetireDeadLettersRequest => ({
      consumer: c,
      requestedBy: 'ana',
      reason: 'test traffic from the load test',
      actionId: `act-${c}-${Math.random()}`,
      ...extra,
    });

    it('discards one dead letter with its audit line; a redelivery is a duplicate counted as discarded, and never runs', async () => {
      const c = 'discard-one';
      const metrics = recordingMeterProvider();
      expect(await consumer(c, metrics.provider).handle(message('bad-1'))).toMatchObject({ status: 'dead-letter', reason: 'permanent-error' });
      expect(await consumer(c).handle(message('bad-2'))).toMatchObject({ status: 'dead-letter' });

      const dry = await store().discardDeadLetters(act(c, { messageIds: ['bad-1'], actionId: 'act-0', dryRun: true }));
      expect(dry).toMatchObject({ dryRun: true, changed: [{ messageId: 'bad-1', priorStatus: 'dead_lettered' }] });
      expect((await store().findRows(c, ['bad-1']))[0]?.status).toBe('dead_lettered');
      expect(await store().listReplays({ consumer: c })).toEqual([]);

      const result = await store().discardDeadLetters(act(c, { messageIds: ['bad-1'], actionId: 'act-1' }));
      expect(result).toEqual({
        action: 'discard',
        actionId: 'act-1',
        dryRun: false,
        changed: [{ consumer: c, messageId: 'bad-1', priorStatus: 'dead_lettered', deadLetterReason: 'permanent-error', attempts: 1 }],
      });
      const [row] = await store().findRows(c, ['bad-1']);
      expect(row).toMatchObject({ status: 'discarded', deadLetterReason: 'permanent-error' });
      const [audit] = await store().listReplays({ consumer: c, messageId: 'bad-1' });
      expect(audit).toMatchObject({ replayId: 'act-1', requestedBy: 'ana', outcome: 'discarded dead_lettered/permanent-error: test traffic from the load test' });
      expect(audit!.at).toBeInstanceOf(Date);
      expect(parseOperatorAudit(audit!.outcome)).toEqual({
        action: 'discarded',
        priorStatus: 'dead_lettered',
        priorReason: 'permanent-error',
        reason: 'test traffic from the load test',
      });
      // Out of the live views; the other dead letter stays.
      expect((await store().listDeadLetters({ consumer: c })).map((r) => r.messageId)).toEqual(['bad-2']);
      expect(await store().deadLetterAges({ consumer: c })).toEqual([{ consumer: c, count: 1, oldestAt: expect.any(Date) }]);

      // Delivered again, and replayed: a duplicate each time, the handler never runs, the duplicate is counted.
      // A replay's dry run predicts it.
      expect(replayDecision((await store().findRows(c, ['bad-1']))[0], 'r-after-discard')).toBe('skip-retired');
      expect(await consumer(c, metrics.provider).handle(message('bad-1'))).toEqual({ status: 'duplicate', messageId: 'bad-1', reason: 'discarded' });
      const replayed = testMessage('bad-1', { id: 'bad-1' }, { timestamp: stamped, replay: { replayId: 'r-after-discard' } });
      expect(await consumer(c, metrics.provider).handle(replayed)).toMatchObject({ status: 'duplicate', reason: 'discarded' });
      expect(metrics.value(METRIC_NAMES.duplicates, { consumer: c, reason: 'discarded' })).toBe(2);
      expect(await countEffects(t.db, t.schema, c, 'bad-1')).toBe(0);
      expect((await store().findRows(c, ['bad-1']))[0]).toMatchObject({ status: 'discarded', attempts: 1 });
    });

    it('discards a reason group and leaves other reasons, other consumers and other states alone', async () => {
      const c = 'discard-group';
      for (const id of ['bad-a', 'bad-b', 'odd-a', 'fine']) await consumer(c).handle(message(id));
      await consumer('discard-group-other').handle(message('bad-a'));
      const result = await store().discardDeadLetters(act(c, { deadLetterReason: 'permanent-error' }));
      expect(result.changed.map((r) => r.messageId)).toEqual(['bad-a', 'bad-b']);
      const rows = await store().findRows(c, ['bad-a', 'bad-b', 'odd-a', 'fine']);
      expect(Object.fromEntries(rows.map((r) => [r.messageId, r.status]))).toEqual({
        'bad-a': 'discarded',
        'bad-b': 'discarded',
        'odd-a': 'dead_lettered',
        fine: 'completed',
      });
      expect((await store().findRows('discard-group-other', ['bad-a']))[0]?.status).toBe('dead_lettered');
      // A completed row is not a dead letter: selecting it by id changes nothing.
      expect((await store().discardDeadLetters(act(c, { messageIds: ['fine'] }))).changed).toEqual([]);
      expect((await store().countByStatus({ consumer: c })).map((s) => [s.status, s.count])).toEqual([
        ['completed', 1],
        ['dead_lettered', 1],
        ['discarded', 2],
      ]);
    });

    it('archives: the record stays with its details, out of the live views; an archived one can then be discarded', async () => {
      const c = 'archive';
      await consumer(c).handle(message('bad-x'));
      const archived = await store().archiveDeadLetters(act(c, { all: true }));
      expect(archived.changed.map((r) => [r.messageId, r.priorStatus])).toEqual([['bad-x', 'dead_lettered']]);
      expect((await store().findRows(c, ['bad-x']))[0]).toMatchObject({ status: 'archived', deadLetterReason: 'permanent-error', lastError: { message: 'card declined' } });
      expect(await store().listDeadLetters({ consumer: c })).toEqual([]);
      expect(await store().countDeadLettersByReason({ consumer: c })).toEqual([]);
      expect(await store().deadLetterAges({ consumer: c })).toEqual([]);
      expect(await consumer(c).handle(message('bad-x'))).toMatchObject({ status: 'duplicate', reason: 'archived' });
      // Archiving twice changes nothing; discarding the archived record does, and says it was archived.
      expect((await store().archiveDeadLetters(act(c, { all: true }))).changed).toEqual([]);
      const discarded = await store().discardDeadLetters(act(c, { messageIds: ['bad-x'] }));
      expect(discarded.changed.map((r) => r.priorStatus)).toEqual(['archived']);
      expect((await store().listReplays({ consumer: c, messageId: 'bad-x' }))[0]?.outcome).toMatch(/^discarded archived\/permanent-error: /);
    });

    it('refuses a selection that names nothing, and bad input, with a RangeError, changing nothing', async () => {
      const c = 'refuse';
      await consumer(c).handle(message('bad-r'));
      await expect(store().discardDeadLetters(act(c, {}))).rejects.toThrow(/select the dead letters/);
      await expect(store().discardDeadLetters(act(c, { all: true, reason: ' ' }))).rejects.toThrow(RangeError);
      await expect(store().discardDeadLetters(act(c, { messageIds: [] }))).rejects.toThrow(/messageIds/);
      await expect(store().archiveDeadLetters(act(c, { since: new Date(Number.NaN) }))).rejects.toThrow(/since/);
      expect((await store().findRows(c, ['bad-r']))[0]?.status).toBe('dead_lettered');
    });

    it('writes the new state and the audit line together: when the audit cannot be written, the row is unchanged', async () => {
      const c = 'atomic';
      await consumer(c).handle(message('bad-t'));
      await t.pool.query(`ALTER TABLE "${t.schema}".inbox_replays ADD CONSTRAINT no_discards CHECK (consumer <> 'atomic' OR outcome NOT LIKE 'discarded%') NOT VALID`);
      try {
        await expect(store().discardDeadLetters(act(c, { messageIds: ['bad-t'] }))).rejects.toThrow(StoreUnavailableError);
      } finally {
        await t.pool.query(`ALTER TABLE "${t.schema}".inbox_replays DROP CONSTRAINT no_discards`);
      }
      expect((await store().findRows(c, ['bad-t']))[0]?.status).toBe('dead_lettered');
      expect(await store().listReplays({ consumer: c })).toEqual([]);
    });

    it('prunes discarded and archived rows past their retention, keeps live dead letters, fresh retired rows and the audit', async () => {
      const c = 'retention';
      for (const id of ['bad-old', 'bad-arch', 'bad-live', 'bad-new']) await consumer(c).handle(message(id));
      await store().discardDeadLetters(act(c, { messageIds: ['bad-old'] }));
      await store().archiveDeadLetters(act(c, { messageIds: ['bad-arch'] }));
      // Acted on a month ago.
      await t.pool.query(`UPDATE "${t.schema}".inbox SET changed_at = now() - interval '31 days' WHERE consumer = $1 AND message_id IN ('bad-old', 'bad-arch')`, [c]);
      await store().discardDeadLetters(act(c, { messageIds: ['bad-new'] }));

      expect(await store().prune({ consumer: c, dryRun: true })).toEqual({ status: 'dry-run', deleted: 2, batches: 0, retired: 2 });
      const pruned = await store().prune({ consumer: c });
      expect(pruned).toMatchObject({ status: 'pruned', deleted: 2, retired: 2 });
      expect((await store().findRows(c, ['bad-old', 'bad-arch', 'bad-live', 'bad-new'])).map((r) => [r.messageId, r.status])).toEqual(
        expect.arrayContaining([
          ['bad-live', 'dead_lettered'],
          ['bad-new', 'discarded'],
        ]),
      );
      expect(await store().findRows(c, ['bad-old', 'bad-arch'])).toEqual([]);
      const details = await t.pool.query(`SELECT count(*)::int AS n FROM "${t.schema}".inbox_details WHERE consumer = $1 AND message_id IN ('bad-old', 'bad-arch')`, [c]);
      expect(details.rows[0].n).toBe(0);
      expect((await store().listReplays({ consumer: c })).map((r) => r.messageId).sort()).toEqual(['bad-arch', 'bad-new', 'bad-old']);
      // A shorter retention takes the fresh one too.
      expect(await store().prune({ consumer: c, retiredRetentionMs: 0 })).toMatchObject({ deleted: 1, retired: 1 });
      await expect(store().prune({ retiredRetentionMs: -1 })).rejects.toThrow(/retiredRetentionMs/);
    });

    it('reports ages and the last audit line of many ids through the inspection API', async () => {
      const c = 'ages';
      for (const id of ['bad-g', 'fine-g']) await consumer(c).handle(message(id));
      await store().archiveDeadLetters(act(c, { messageIds: ['bad-g'], reason: 'kept for the auditors' }));
      const [ages] = await store().inboxAges({ consumer: c });
      expect(ages).toMatchObject({ consumer: c, expired: 0, replayed: 0, oldestExpiredAt: undefined });
      expect(ages!.oldestAt).toBeInstanceOf(Date);
      expect(await store().lastAuditOutcomes(c, ['bad-g', 'fine-g'])).toEqual(new Map([['bad-g', 'archived dead_lettered/permanent-error: kept for the auditors']]));
    });

    if (layout === 'daily-partitions') {
      /**
       * A store without the cross-day check, and a consumer on it that dead-letters a copy stamped before
       * `stamped` and applies the rest; `onTwoDays(id)` gives the id a dead letter yesterday and a completed
       * row today.
       */
      const twoDays = (c: string) => {
        const loose = new PostgresInboxStore({ db: t.db, schema: t.schema, layout, crossDayCheck: false });
        const run = idempotentConsumer<unknown, TestTx>({
          name: c,
          store: loose,
          maxAttempts: 1,
          handler: async (m, { tx }) => {
            if (m.timestamp!.getTime() < stamped.getTime()) throw new PermanentError('stale copy');
            await insertEffect(tx, t.schema, c, m.id);
          },
        });
        const yesterday = new Date(stamped.getTime() - 86_400_000);
        const onTwoDays = async (id: string) => {
          expect(await run.handle(testMessage(id, { id }, { timestamp: yesterday }))).toMatchObject({ status: 'dead-letter' });
          expect(await run.handle(testMessage(id, { id }, { timestamp: stamped }))).toMatchObject({ status: 'processed' });
        };
        return { loose, onTwoDays };
      };

      it('joins a row to the details of its own day: one id on two days (no cross-day check) reads as two rows', async () => {
        const c = 'two-days';
        const { loose, onTwoDays } = twoDays(c);
        await onTwoDays('twice');
        const rows = await loose.findRows(c, ['twice']);
        expect(rows.map((r) => [r.status, r.deadLetterReason]).sort()).toEqual([
          ['completed', null],
          ['dead_lettered', 'permanent-error'],
        ]);
        expect(await loose.countDeadLettersByReason({ consumer: c })).toEqual([{ consumer: c, reason: 'permanent-error', count: 1 }]);
        expect(await loose.deadLetterAges({ consumer: c })).toEqual([{ consumer: c, count: 1, oldestAt: expect.any(Date) }]);
        // Discarding the dead letter leaves the completed row of the other day as it is.
        expect((await loose.discardDeadLetters(act(c, { messageIds: ['twice'] }))).changed).toHaveLength(1);
        expect((await loose.findRows(c, ['twice'])).map((r) => r.status).sort()).toEqual(['completed', 'discarded']);
      });

      it('acts on one id on two days through the row of the state the act needs, and touches only that day (edit and retry, forget)', async () => {
        const c = 'two-days-acts';
        const { loose, onTwoDays } = twoDays(c);
        // Yesterday's copy a dead letter, today's completed: the same id, a row (and details) on each day. The
        // completed row is the later one, so the acts below cannot take it by its position either way.
        for (const id of ['amended', 'forgotten']) await onTwoDays(id);
        const byStatus = async (id: string) => new Map((await loose.findRows(c, [id])).map((r) => [r.status, r]));
        const before = await byStatus('amended');
        const dead = before.get('dead_lettered')!;
        const done = before.get('completed')!;

        const amended = await loose.amendDeadLetter({
          consumer: c,
          messageId: 'amended',
          fromFingerprint: dead.fingerprint,
          toFingerprint: 'corrected',
          replayId: 'edit-1',
          requestedBy: 'ana',
          reason: 'the stale copy, corrected',
        });
        expect(amended).toMatchObject({ kind: 'amended', row: { status: 'dead_lettered', deadLetterReason: 'permanent-error', fingerprint: 'corrected' } });
        const after = await byStatus('amended');
        expect(after.get('dead_lettered')).toMatchObject({ fingerprint: 'corrected', deadLetterReason: 'permanent-error' });
        expect(after.get('completed')).toMatchObject({ fingerprint: done.fingerprint, deadLetterReason: null });

        const forgotten = await loose.forgetCompleted({ consumer: c, messageId: 'forgotten', actionId: 'forget-1', requestedBy: 'ana', reason: 'run it again' });
        expect(forgotten).toMatchObject({ kind: 'forgotten', row: { status: 'completed', deadLetterReason: null } });
        // The dead letter of the other day keeps its row and its details (its reason, its time).
        const left = await loose.findRows(c, ['forgotten']);
        expect(left).toHaveLength(1);
        expect(left[0]).toMatchObject({ status: 'dead_lettered', deadLetterReason: 'permanent-error', lastError: expect.objectContaining({ message: 'stale copy' }) });
        expect(left[0]!.deadLetteredAt).toBeInstanceOf(Date);
        expect((await loose.listReplays({ consumer: c })).map((r) => [r.messageId, r.replayId]).sort()).toEqual([
          ['amended', 'edit-1'],
          ['forgotten', 'forget-1'],
        ]);
      });

      it('keeps a dead letter of a dropped day in the lifecycle: in inbox_default, still listed, discarded and pruned there', async () => {
        const c = 'dropped-day';
        const old = new Date(Date.now() - 40 * 86_400_000).toISOString().slice(0, 10);
        await t.pool.query(`SELECT "${t.schema}".inbox_add_partition($1::date)`, [old]);
        await t.pool.query(
          `INSERT INTO "${t.schema}".inbox (consumer, message_id, day, status, fingerprint, attempts, changed_at, expires_at)
           VALUES ($1, 'bad-d', $2, 'dead_lettered', 'f', 5, now(), now() - interval '30 days')`,
          [c, old],
        );
        await t.pool.query(
          `INSERT INTO "${t.schema}".inbox_details (consumer, message_id, day, received_at, dead_letter_reason, dead_lettered_at)
           VALUES ($1, 'bad-d', $2, now() - interval '40 days', 'max-attempts', now() - interval '39 days')`,
          [c, old],
        );
        const dropped = await t.pool.query(`SELECT "${t.schema}".inbox_drop_partition($1::date, $2::float8) AS answer`, [old, 86_400_000]);
        expect(dropped.rows[0].answer).toBe('dropped:1');
        const where = await t.pool.query(
          `SELECT c.relname FROM "${t.schema}".inbox h JOIN pg_class c ON c.oid = h.tableoid WHERE h.consumer = $1`,
          [c],
        );
        expect(where.rows.map((r: { relname: string }) => r.relname)).toEqual(['inbox_default']);
        expect((await store().listDeadLetters({ consumer: c }))[0]).toMatchObject({ messageId: 'bad-d', deadLetterReason: 'max-attempts' });
        const [age] = await store().deadLetterAges({ consumer: c });
        expect(Date.now() - age!.oldestAt!.getTime()).toBeGreaterThan(38 * 86_400_000);
        expect((await store().discardDeadLetters(act(c, { messageIds: ['bad-d'] }))).changed).toHaveLength(1);
        expect(await store().prune({ consumer: c, retiredRetentionMs: 0 })).toMatchObject({ retired: 1 });
        expect(await store().findRows(c, ['bad-d'])).toEqual([]);
      });
    }
  });
}
