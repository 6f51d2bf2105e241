// The inbox store conformance suite: every InboxStore (Postgres, PGlite, in-memory, a new one) must pass it.
// It drives the store through idempotentConsumer() and checks observable semantics — effects applied, outcomes,
// rows — so a store that cheats on atomicity is caught by counting effects, not by reading its code.

import { setTimeout as sleep } from 'node:timers/promises';
import {
  attemptLedgerOf,
  downstreamKey,
  fingerprintJson,
  idempotentConsumer,
  parseOperatorAudit,
  PermanentError,
  RetryableError,
  statementHandler,
  type EffectStatement,
  type IdempotentConsumer,
  type IdempotentConsumerConfig,
  type InboundMessage,
  type InboxStore,
  type Outcome,
} from '@inboxkit/core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { uniqueName } from './unique-name.js';

/** What a conformance run needs from a store under test. */
export interface InboxStoreUnderTest<Tx> {
  readonly store: InboxStore<Tx>;
  /**
   * Applies one effect of `messageId` through the handler's transaction (for Postgres: an INSERT into an
   * effects table without a unique key, so a double effect is counted, never masked).
   */
  applyEffect(tx: Tx, consumer: string, messageId: string): Promise<void>;
  /** Committed effects of one message of `consumer`, or of all its messages. */
  countEffects(consumer: string, messageId?: string): Promise<number>;
  /**
   * The same effect as one SQL statement, for statement handlers (`statementHandler`): when given, the suite runs
   * its statement-handler cases too. A store whose transaction cannot run statements leaves it out.
   */
  statementEffect?(consumer: string, messageId: string): EffectStatement;
  /**
   * Sends, through the handler's transaction, a statement Postgres refuses (`SELECT 1 / 0`) and catches its error,
   * as a handler that swallows a failed statement does: when given, the suite checks that such an attempt commits
   * nothing and is not acked. A store whose transaction cannot be aborted that way leaves it out.
   */
  readonly failStatementQuietly?: (tx: Tx) => Promise<void>;
  /**
   * Sends SQL text through the handler's transaction, the library's own way (`tx.query(text)`,
   * `sql.raw(text).execute(tx)` …): when given, the suite checks that a handler which sends COMMIT or ROLLBACK
   * through it is caught — never reported processed or duplicate, never applied twice, and dead-lettered with
   * reason `transaction-control`. A store whose transaction cannot run SQL leaves it out.
   */
  readonly sendStatement?: (tx: Tx, sql: string) => Promise<unknown>;
  /**
   * A second store over the same inbox, as another process would build it (same database, same table): when
   * given, the suite checks that both name the same `identity()`, since the fast path shares entries by it.
   */
  readonly sameInbox?: () => InboxStore<Tx>;
  /**
   * A store over a different inbox (another schema or table of the same database): when given, the suite checks
   * that its `identity()` differs, since a fast path shared by both would otherwise answer one with the other's
   * entries.
   */
  readonly otherInbox?: () => InboxStore<Tx>;
  /** Releases what the factory created. */
  close?(): Promise<void>;
}

/** Builds a delivery: JSON body, no headers, memory transport. */
export function testMessage(id: string | undefined, payload: unknown = { id }, extra: Partial<InboundMessage> = {}): InboundMessage {
  return { id, body: JSON.stringify(payload), headers: {}, source: { transport: 'memory' }, ...extra };
}

/**
 * Registers the store conformance suite with vitest. `factory` is called before each test and must return a
 * fresh (or freshly isolated) store; every test uses its own consumer name.
 *
 * @example
 * describeInboxStoreConformance('in-memory', async () => {
 *   const store = new InMemoryInboxStore();
 *   return { store, applyEffect: async (tx) => tx.stage(1), countEffects: async (c, id) => store.countEffects(c, id) };
 * });
 */
export function describeInboxStoreConformance<Tx>(name: string, factory: () => Promise<InboxStoreUnderTest<Tx>>): void {
  describe(`InboxStore conformance: ${name}`, () => {
    let subject: InboxStoreUnderTest<Tx>;
    let consumerName: string;

    beforeEach(async () => {
      subject = await factory();
      consumerName = uniqueName('conformance');
    });
    afterEach(async () => {
      await subject.close?.();
    });

    /** A consumer whose handler applies one effect, optionally failing first via `behaviour`. */
    function consumer(
      overrides: Partial<IdempotentConsumerConfig<unknown, Tx>> = {},
      behaviour?: (id: string, attempt: number) => Promise<void> | void,
    ): IdempotentConsumer<unknown, Tx> {
      return idempotentConsumer<unknown, Tx>({
        name: consumerName,
        store: subject.store,
        backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
        handler: async (message, context) => {
          await behaviour?.(message.id, context.attempt);
          await subject.applyEffect(context.tx, consumerName, message.id);
        },
        ...overrides,
      });
    }

    const effects = (id?: string): Promise<number> => subject.countEffects(consumerName, id);

    describe('claim and duplicates', () => {
      it('processes a new message once and answers duplicate on every redelivery', async () => {
        const c = consumer();
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'processed', messageId: 'm1', attempt: 1 });
        expect(await c.handle(testMessage('m1'))).toEqual({ status: 'duplicate', messageId: 'm1', reason: 'completed' });
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'duplicate' });
        expect(await effects('m1')).toBe(1);
        const [row] = await subject.store.findRows(consumerName, ['m1']);
        expect(row).toMatchObject({ status: 'completed', attempts: 1, messageId: 'm1' });
        expect(row!.completedAt).toBeInstanceOf(Date);
        expect(row!.expiresAt.getTime()).toBeGreaterThan(Date.now());
      });

      it('applies concurrent deliveries of one id exactly once', async () => {
        const c = consumer({}, () => sleep(5));
        const outcomes = await Promise.all(Array.from({ length: 8 }, () => c.handle(testMessage('m1'))));
        expect(outcomes.filter((o) => o.status === 'processed')).toHaveLength(1);
        for (const o of outcomes) expect(['processed', 'duplicate', 'retry']).toContain(o.status);
        expect(await effects('m1')).toBe(1);
      });

      it('scopes dedupe by consumer name', async () => {
        const a = consumer();
        const b = idempotentConsumer<unknown, Tx>({
          name: `${consumerName}-b`,
          store: subject.store,
          handler: async (m, { tx }) => subject.applyEffect(tx, `${consumerName}-b`, m.id),
        });
        expect((await a.handle(testMessage('m1'))).status).toBe('processed');
        expect((await b.handle(testMessage('m1'))).status).toBe('processed');
        expect(await subject.countEffects(`${consumerName}-b`, 'm1')).toBe(1);
        expect(await effects('m1')).toBe(1);
      });

      it('dead-letters a different payload under a known id as payload-mismatch and leaves the row alone', async () => {
        const c = consumer();
        await c.handle(testMessage('m1', { amount: 1 }));
        const [before] = await subject.store.findRows(consumerName, ['m1']);
        const outcome = await c.handle(testMessage('m1', { amount: 2 }));
        expect(outcome).toMatchObject({ status: 'dead-letter', reason: 'payload-mismatch', messageId: 'm1' });
        const [after] = await subject.store.findRows(consumerName, ['m1']);
        expect(after).toEqual(before);
        expect(await effects('m1')).toBe(1);
      });

      it('treats the same payload with keys in another order as the same message', async () => {
        const c = consumer();
        await c.handle(testMessage('m1', { a: 1, b: { c: 2, d: 3 } }));
        const again = await c.handle({ ...testMessage('m1'), body: '{"b":{"d":3,"c":2},"a":1}' });
        expect(again.status).toBe('duplicate');
      });
    });

    describe('failures, retries and dead letters', () => {
      it('does not ack a message whose handler swallowed a failed statement: nothing was committed', async (ctx) => {
        const under = subject;
        if (under.failStatementQuietly === undefined) return ctx.skip();
        const swallowing = idempotentConsumer<unknown, Tx>({
          name: consumerName,
          store: subject.store,
          backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
          handler: async (m, { tx }) => {
            await subject.applyEffect(tx, consumerName, m.id);
            if (m.id.startsWith('bad')) await under.failStatementQuietly!(tx);
          },
        });
        expect(await swallowing.handle(testMessage('bad-1'))).toMatchObject({ status: 'retry', reason: 'handler-error', attempt: 1 });
        const outcomes = await swallowing.handleBatch([testMessage('ok-1'), testMessage('bad-2'), testMessage('ok-2')]);
        expect(outcomes.map((o) => o.status)).toEqual(['processed', 'retry', 'processed']);
        expect(await effects('bad-1')).toBe(0);
        expect(await effects('bad-2')).toBe(0);
        expect(await effects()).toBe(2);
        expect(await subject.store.findRows(consumerName, ['bad-1'])).toMatchObject([{ status: 'failed', attempts: 1 }]);
      });

      it('records a failure with its delay and refuses to run the message early', async () => {
        let runs = 0;
        const c = consumer({}, () => {
          runs++;
          throw new RetryableError('downstream busy', { delayMs: 60_000 });
        });
        const first = await c.handle(testMessage('m1'));
        expect(first).toMatchObject({ status: 'retry', reason: 'handler-error', delayMs: 60_000, attempt: 1 });
        const early = await c.handle(testMessage('m1'));
        expect(early).toMatchObject({ status: 'retry', reason: 'handler-error', attempt: 0 });
        expect((early as { delayMs: number }).delayMs).toBeGreaterThan(50_000);
        expect((early as { delayMs: number }).delayMs).toBeLessThanOrEqual(60_000);
        expect(runs).toBe(1);
        const [row] = await subject.store.findRows(consumerName, ['m1']);
        expect(row).toMatchObject({ status: 'failed', attempts: 1, lastError: { name: 'RetryableError', message: 'downstream busy' } });
        expect(row!.firstFailureAt).toBeInstanceOf(Date);
        expect(await effects()).toBe(0);
      });

      it('retries, then dead-letters with max-attempts, and keeps answering dead-letter without running', async () => {
        let runs = 0;
        const c = consumer({ maxAttempts: 3 }, () => {
          runs++;
          throw new Error('flaky');
        });
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'retry', attempt: 1 });
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'retry', attempt: 2 });
        const dead = await c.handle(testMessage('m1'));
        expect(dead).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3, error: { message: 'flaky' } });
        expect((dead as { firstFailureAt?: Date }).firstFailureAt).toBeInstanceOf(Date);
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
        expect(runs).toBe(3);
        expect(await effects()).toBe(0);
        expect(await subject.store.countDeadLettersByReason({ consumer: consumerName })).toEqual([
          { consumer: consumerName, reason: 'max-attempts', count: 1 },
        ]);
      });

      it('dead-letters a permanent error at once', async () => {
        const c = consumer({}, () => {
          throw new PermanentError('negative amount');
        });
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'dead-letter', reason: 'permanent-error', attempts: 1 });
        const [row] = await subject.store.listDeadLetters({ consumer: consumerName });
        expect(row).toMatchObject({ messageId: 'm1', status: 'dead_lettered', deadLetterReason: 'permanent-error' });
      });

      it('succeeds on a later attempt with exactly one effect', async () => {
        const c = consumer({}, (_id, attempt) => {
          if (attempt < 3) throw new Error('not yet');
        });
        expect((await c.handle(testMessage('m1'))).status).toBe('retry');
        expect((await c.handle(testMessage('m1'))).status).toBe('retry');
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'processed', attempt: 3 });
        expect(await effects('m1')).toBe(1);
      });

      it('counts the broker delivery count: beyond maxAttempts the handler does not run', async () => {
        let runs = 0;
        const c = consumer({ maxAttempts: 3 }, () => void runs++);
        expect(await c.handle(testMessage('m1', { id: 'm1' }, { deliveryCount: 4 }))).toMatchObject({
          status: 'dead-letter',
          reason: 'max-attempts',
          attempts: 3,
        });
        expect(await c.handle(testMessage('m2', { id: 'm2' }, { deliveryCount: 3 }))).toMatchObject({ status: 'processed', attempt: 3 });
        expect(runs).toBe(1);
      });

      it('reaches dead-letter in a crash loop through recordAttemptsStarted', async () => {
        let runs = 0;
        const c = consumer({ maxAttempts: 3 }, () => void runs++);
        const m = testMessage('m1');
        // Three deliveries whose process died mid-handler: only the started attempt is durable.
        for (let i = 0; i < 3; i++) await attemptLedgerOf(c)!.recordAttemptsStarted([m]);
        await attemptLedgerOf(c)!.recordAttemptsStarted([m]);
        expect(await c.handle(m)).toMatchObject({ status: 'dead-letter', reason: 'max-attempts', attempts: 3 });
        expect(runs).toBe(0);
      });

      it('does not count an attempt twice when recordAttemptsStarted precedes handle', async () => {
        const c = consumer({ maxAttempts: 3 }, (_id, attempt) => {
          if (attempt < 2) throw new Error('first fails');
        });
        const m = testMessage('m1');
        await attemptLedgerOf(c)!.recordAttemptsStarted([m]);
        expect(await c.handle(m)).toMatchObject({ status: 'retry', attempt: 1 });
        await attemptLedgerOf(c)!.recordAttemptsStarted([m]);
        expect(await c.handle(m)).toMatchObject({ status: 'processed', attempt: 2 });
        await attemptLedgerOf(c)!.recordAttemptsStarted([m]);
        expect((await c.handle(m)).status).toBe('duplicate');
        const [row] = await subject.store.findRows(consumerName, ['m1']);
        expect(row).toMatchObject({ status: 'completed', attempts: 2 });
      });

      it('tells crash suspects (no row, or a started attempt with no recorded end) from retries and settled rows', async () => {
        const failing = new Set(['retry', 'retry-started', 'dead']);
        const c = consumer({ maxAttempts: 5 }, (id) => {
          if (failing.has(id)) throw new Error('fails');
        });
        await c.handle(testMessage('done'));
        // A plain retry: its attempt was charged before it ran, and its failure is on record.
        await attemptLedgerOf(c)!.recordAttemptsStarted([testMessage('retry')]);
        expect(await c.handle(testMessage('retry'))).toMatchObject({ status: 'retry', attempt: 1 });
        // Charged twice, never ended: its process died twice.
        await attemptLedgerOf(c)!.recordAttemptsStarted([testMessage('started')]);
        await attemptLedgerOf(c)!.recordAttemptsStarted([testMessage('started')]);
        // A retry charged again, whose attempt never ended.
        expect(await c.handle(testMessage('retry-started'))).toMatchObject({ status: 'retry', attempt: 1 });
        await attemptLedgerOf(c)!.recordAttemptsStarted([testMessage('retry-started')]);
        expect(await consumer({ maxAttempts: 1 }, () => { throw new Error('fails'); }).handle(testMessage('dead'))).toMatchObject({ status: 'dead-letter' });
        const asked = ['done', 'retry', 'started', 'retry-started', 'dead', 'new', ''].map((id) => testMessage(id));
        expect(Object.fromEntries(await attemptLedgerOf(c)!.crashSuspects!([...asked, testMessage(undefined)]))).toEqual({ started: 2, 'retry-started': 2, new: 0 });
      });
    });

    describe('a handler that controls its transaction', () => {
      /** A consumer whose handler first sends `control` through its transaction (ignoring the answer), then `rest`. */
      function controlling(control: string, rest: (tx: Tx, id: string) => Promise<void>, overrides: Partial<IdempotentConsumerConfig<unknown, Tx>> = {}) {
        return idempotentConsumer<unknown, Tx>({
          name: consumerName,
          store: subject.store,
          maxAttempts: 3,
          backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
          handler: async (m, { tx }) => {
            await subject.sendStatement!(tx, control).catch(() => undefined);
            await rest(tx, m.id);
          },
          ...overrides,
        });
      }

      it('ROLLBACK, then an effect: dead-lettered as transaction-control, never processed, never applied twice', async (ctx) => {
        if (subject.sendStatement === undefined) return ctx.skip();
        const c = controlling('ROLLBACK', (tx, id) => subject.applyEffect(tx, consumerName, id));
        const first = await c.handle(testMessage('m1'));
        expect(first).toMatchObject({ status: 'dead-letter', reason: 'transaction-control', attempts: 1 });
        expect((first as { error?: { name: string } }).error?.name).toBe('TransactionControlError');
        // The redelivery does not run the handler again: the dead letter waits for an operator.
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'dead-letter', reason: 'transaction-control' });
        expect(await effects('m1')).toBeLessThanOrEqual(1);
        expect(await subject.store.findRows(consumerName, ['m1'])).toMatchObject([{ status: 'dead_lettered', deadLetterReason: 'transaction-control' }]);
        // Every spelling of the same act: END, ABORT, COMMIT, ROLLBACK in a multi-statement text, after a comment.
        for (const [i, control] of ['END', 'abort', '/* x */ commit', 'SELECT 1; ROLLBACK', 'COMMIT; BEGIN'].entries()) {
          const other = controlling(control, (tx, id) => subject.applyEffect(tx, consumerName, id));
          expect(await other.handle(testMessage(`v${i}`)), control).toMatchObject({ status: 'dead-letter', reason: 'transaction-control' });
          expect(await other.handle(testMessage(`v${i}`)), control).toMatchObject({ status: 'dead-letter', reason: 'transaction-control' });
          expect(await effects(`v${i}`), control).toBeLessThanOrEqual(1);
        }
        // In a batch, only the message whose handler did it.
        const b = idempotentConsumer<unknown, Tx>({
          name: consumerName,
          store: subject.store,
          handler: async (m, { tx }) => {
            if (m.id === 'b-bad') await subject.sendStatement!(tx, 'ROLLBACK').catch(() => undefined);
            await subject.applyEffect(tx, consumerName, m.id);
          },
        });
        const outcomes = await b.handleBatch([testMessage('b-1'), testMessage('b-bad'), testMessage('b-2')]);
        expect(outcomes.map((o) => [o.status, (o as { reason?: string }).reason])).toEqual([
          ['processed', undefined],
          ['dead-letter', 'transaction-control'],
          ['processed', undefined],
        ]);
        expect(await effects('b-1')).toBe(1);
        expect(await effects('b-2')).toBe(1);
        expect(await effects('b-bad')).toBeLessThanOrEqual(1);
      });

      it('an effect, COMMIT, then a throw: not reported duplicate; the dead letter says why', async (ctx) => {
        if (subject.sendStatement === undefined) return ctx.skip();
        let runs = 0;
        const c = idempotentConsumer<unknown, Tx>({
          name: consumerName,
          store: subject.store,
          maxAttempts: 3,
          backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
          handler: async (m, { tx }) => {
            runs++;
            await subject.applyEffect(tx, consumerName, m.id);
            await subject.sendStatement!(tx, 'COMMIT').catch(() => undefined);
            throw new Error('after the commit');
          },
        });
        const first = await c.handle(testMessage('m1'));
        expect(first).toMatchObject({ status: 'dead-letter', reason: 'transaction-control', attempts: 1 });
        expect((first as { error?: { message: string } }).error?.message).toMatch(/COMMIT/);
        const again = await c.handle(testMessage('m1'));
        expect(again.status).not.toBe('duplicate');
        expect(again).toMatchObject({ status: 'dead-letter', reason: 'transaction-control' });
        expect(runs).toBe(1);
        expect(await effects('m1')).toBeLessThanOrEqual(1);
      });

      it('counts every attempt and reaches a dead letter when the handler commits and throws on every delivery', async (ctx) => {
        if (subject.sendStatement === undefined) return ctx.skip();
        let runs = 0;
        const c = controlling(
          'COMMIT',
          async () => {
            runs++;
            throw new TypeError('after the commit');
          },
          { isRetriable: () => true },
        );
        const seen: Outcome[] = [];
        for (let i = 0; i < 4 && seen.at(-1)?.status !== 'dead-letter'; i++) seen.push(await c.handle(testMessage('m1')));
        expect(seen.at(-1)).toMatchObject({ status: 'dead-letter', reason: 'transaction-control' });
        for (const o of seen) if (o.status === 'retry') expect(o.attempt).toBeGreaterThan(0);
        expect(runs).toBe(1);
      });
    });

    describe('replay', () => {
      it('reopens a dead letter once per replay id, audited, and skips a completed one', async () => {
        let fail = true;
        const c = consumer({}, () => {
          if (fail) throw new PermanentError('bad');
        });
        expect((await c.handle(testMessage('m1'))).status).toBe('dead-letter');
        expect((await c.handle(testMessage('m1'))).status).toBe('dead-letter');
        fail = false;
        const replay = { replayId: 'r1', requestedBy: 'ops@example.com' };
        expect(await c.handle(testMessage('m1', { id: 'm1' }, { replay }))).toMatchObject({ status: 'processed', attempt: 1 });
        expect(await c.handle(testMessage('m1', { id: 'm1' }, { replay }))).toEqual({
          status: 'duplicate',
          messageId: 'm1',
          reason: 'replay-of-completed',
        });
        expect(await c.handle(testMessage('m1', { id: 'm1' }, { replay: { replayId: 'r2' } }))).toMatchObject({
          status: 'duplicate',
          reason: 'replay-of-completed',
        });
        expect(await effects('m1')).toBe(1);
        const [row] = await subject.store.findRows(consumerName, ['m1']);
        expect(row).toMatchObject({ status: 'completed', replayCount: 1, lastReplayId: 'r1' });
        const audit = await subject.store.listReplays({ consumer: consumerName, messageId: 'm1' });
        expect(audit).toHaveLength(3);
        expect(audit.map((a) => a.replayId).sort()).toEqual(['r1', 'r1', 'r2']);
        expect(audit.find((a) => a.outcome.startsWith('replayed:processed'))).toMatchObject({ requestedBy: 'ops@example.com' });
        expect(audit.filter((a) => a.outcome.startsWith('skipped-completed'))).toHaveLength(2);
      });

      it('does not reopen twice under the same replay id', async () => {
        let runs = 0;
        const c = consumer({}, () => {
          runs++;
          throw new PermanentError('still bad');
        });
        await c.handle(testMessage('m1'));
        const replay = { replayId: 'r1' };
        expect(await c.handle(testMessage('m1', { id: 'm1' }, { replay }))).toMatchObject({
          status: 'dead-letter',
          reason: 'permanent-error',
          attempts: 1,
        });
        expect(await c.handle(testMessage('m1', { id: 'm1' }, { replay }))).toMatchObject({ status: 'dead-letter', reason: 'permanent-error' });
        expect(runs).toBe(2);
        const [row] = await subject.store.findRows(consumerName, ['m1']);
        expect(row).toMatchObject({ status: 'dead_lettered', replayCount: 1, lastReplayId: 'r1', attempts: 1 });
        // A later replay run may try again.
        expect(await c.handle(testMessage('m1', { id: 'm1' }, { replay: { replayId: 'r2' } }))).toMatchObject({ status: 'dead-letter' });
        expect(runs).toBe(3);
      });
    });

    describe("operators' acts: edit and retry, forget one id", () => {
      /** A consumer that refuses a negative amount for good (dead-lettered at once). */
      const amounts = (): IdempotentConsumer<unknown, Tx> =>
        consumer({
          handler: async (message, context) => {
            if ((message.payload as { amount: number }).amount < 0) throw new PermanentError('negative amount');
            await subject.applyEffect(context.tx, consumerName, message.id);
          },
        });
      const fp = (payload: unknown): string => fingerprintJson(JSON.stringify(payload), payload);
      const audit = () => subject.store.listReplays({ consumer: consumerName, messageId: 'm1' });

      it('edit and retry: the amended payload is replayed once, audited; the old one and an unaudited other one stay payload-mismatch', async () => {
        const store = subject.store;
        expect('amendDeadLetter' in store, 'the store implements amendDeadLetter').toBe(true);
        const c = amounts();
        const bad = { amount: -5 };
        const fixed = { amount: 5 };
        expect(await c.handle(testMessage('m1', bad))).toMatchObject({ status: 'dead-letter', reason: 'permanent-error' });
        // Without the audited act, another payload under the same id is refused.
        expect(await c.handle(testMessage('m1', fixed, { replay: { replayId: 'r0' } }))).toMatchObject({
          status: 'dead-letter',
          reason: 'payload-mismatch',
        });
        const [before] = await store.findRows(consumerName, ['m1']);
        expect(before).toMatchObject({ status: 'dead_lettered', fingerprint: fp(bad) });

        const amendment = {
          consumer: consumerName,
          messageId: 'm1',
          fromFingerprint: fp(bad),
          toFingerprint: fp(fixed),
          replayId: 'r1',
          requestedBy: 'alice',
          reason: 'the amount was entered negative',
        };
        const amended = await store.amendDeadLetter!(amendment);
        expect(amended).toMatchObject({ kind: 'amended', row: { status: 'dead_lettered', fingerprint: fp(fixed) } });
        const [row] = await store.findRows(consumerName, ['m1']);
        expect(row).toEqual({ ...before, fingerprint: fp(fixed) });
        const line = (await audit()).find((a) => a.replayId === 'r1');
        expect(line).toMatchObject({ requestedBy: 'alice' });
        expect(line!.at).toBeInstanceOf(Date);
        expect(parseOperatorAudit(line!.outcome)).toEqual({
          action: 'amended',
          fromFingerprint: fp(bad),
          toFingerprint: fp(fixed),
          reason: 'the amount was entered negative',
        });
        // A second operator who saw the old fingerprint changes nothing.
        const lines = (await audit()).length;
        expect(await store.amendDeadLetter!({ ...amendment, replayId: 'r9', toFingerprint: fp({ amount: 9 }) })).toMatchObject({
          kind: 'fingerprint-changed',
          row: { fingerprint: fp(fixed) },
        });
        expect(await audit()).toHaveLength(lines);

        // The old payload and any other payload are refused; the amended one is applied once.
        expect(await c.handle(testMessage('m1', bad, { replay: { replayId: 'r2' } }))).toMatchObject({ reason: 'payload-mismatch' });
        expect(await c.handle(testMessage('m1', { amount: 7 }, { replay: { replayId: 'r3' } }))).toMatchObject({
          reason: 'payload-mismatch',
        });
        expect(await effects('m1')).toBe(0);
        expect(await c.handle(testMessage('m1', fixed, { replay: { replayId: 'r1' } }))).toMatchObject({ status: 'processed' });
        expect(await c.handle(testMessage('m1', fixed, { replay: { replayId: 'r1' } }))).toMatchObject({ status: 'duplicate' });
        expect(await c.handle(testMessage('m1', fixed))).toMatchObject({ status: 'duplicate' });
        expect(await effects('m1')).toBe(1);
        expect(await store.amendDeadLetter!({ ...amendment, fromFingerprint: fp(fixed) })).toMatchObject({
          kind: 'not-dead-lettered',
          row: { status: 'completed' },
        });
        expect(await store.amendDeadLetter!({ ...amendment, messageId: 'nope' })).toEqual({ kind: 'no-row' });
      });

      it('forget one id: deletes a completed row, audited, so the next delivery is processed again; other states are left alone', async () => {
        const store = subject.store;
        expect('forgetCompleted' in store, 'the store implements forgetCompleted').toBe(true);
        const c = amounts();
        await c.handle(testMessage('m1', { amount: 1 }));
        expect(await c.handle(testMessage('m1', { amount: 1 }))).toMatchObject({ status: 'duplicate' });
        await c.handle(testMessage('m2', { amount: -1 }));
        const request = { consumer: consumerName, messageId: 'm1', actionId: 'f1', requestedBy: 'bob', reason: 'reprocess after the fix' };
        const [before] = await store.findRows(consumerName, ['m1']);
        expect(await store.forgetCompleted!(request)).toEqual({ kind: 'forgotten', row: before });
        expect(await store.findRows(consumerName, ['m1'])).toEqual([]);
        const [line] = await audit();
        expect(line).toMatchObject({ replayId: 'f1', requestedBy: 'bob' });
        expect(parseOperatorAudit(line!.outcome)).toEqual({ action: 'forgotten', fingerprint: fp({ amount: 1 }), reason: 'reprocess after the fix' });

        // On purpose, the next delivery applies it again, as a new message.
        expect(await c.handle(testMessage('m1', { amount: 1 }))).toMatchObject({ status: 'processed', attempt: 1 });
        expect(await effects('m1')).toBe(2);
        expect((await store.findRows(consumerName, ['m1']))[0]).toMatchObject({ status: 'completed', attempts: 1, replayCount: 0 });

        // Only completed rows.
        const [dead] = await store.findRows(consumerName, ['m2']);
        expect(await store.forgetCompleted!({ ...request, messageId: 'm2' })).toEqual({ kind: 'not-completed', row: dead });
        expect(await store.findRows(consumerName, ['m2'])).toEqual([dead]);
        expect(await store.forgetCompleted!({ ...request, messageId: 'nope' })).toEqual({ kind: 'no-row' });
        expect(await store.listReplays({ consumer: consumerName })).toHaveLength(1);
      });

      it('forgets a row that has details (a replayed dead letter): the next delivery starts from nothing', async () => {
        let fail = true;
        const c = consumer({}, () => {
          if (fail) throw new PermanentError('bad');
        });
        await c.handle(testMessage('m1'));
        fail = false;
        expect(await c.handle(testMessage('m1', { id: 'm1' }, { replay: { replayId: 'r1' } }))).toMatchObject({ status: 'processed' });
        expect((await subject.store.findRows(consumerName, ['m1']))[0]).toMatchObject({ replayCount: 1, lastReplayId: 'r1' });
        expect(
          await subject.store.forgetCompleted!({ consumer: consumerName, messageId: 'm1', actionId: 'f', requestedBy: 'x', reason: 'y' }),
        ).toMatchObject({ kind: 'forgotten' });
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'processed', attempt: 1 });
        const [row] = await subject.store.findRows(consumerName, ['m1']);
        expect(row).toMatchObject({ status: 'completed', attempts: 1, replayCount: 0, lastReplayId: null, lastError: null, deadLetterReason: null });
        expect(await effects('m1')).toBe(2);
      });
    });

    describe('dedupe window', () => {
      it('dead-letters a message older than the window that has no row, and records it', async () => {
        const c = consumer({ dedupeWindowMs: 60_000 });
        const old = new Date(Date.now() - 120_000);
        const outcome = await c.handle(testMessage('late', { id: 'late' }, { timestamp: old }));
        expect(outcome).toMatchObject({ status: 'dead-letter', reason: 'beyond-dedupe-window', attempts: 0 });
        expect(await effects()).toBe(0);
        const [row] = await subject.store.findRows(consumerName, ['late']);
        expect(row).toMatchObject({ status: 'dead_lettered', deadLetterReason: 'beyond-dedupe-window' });
        // An explicit replay reopens it: the row makes the answer honest.
        expect(await c.handle(testMessage('late', { id: 'late' }, { timestamp: old, replay: { replayId: 'r' } }))).toMatchObject({
          status: 'processed',
        });
        expect(await effects('late')).toBe(1);
      });

      it('answers honestly for an old message whose row exists', async () => {
        // The same record delivered twice keeps its timestamp (a store partitioned by day finds its row by it):
        // first taken by a consumer that processes late messages, then redelivered to one that would refuse them.
        const stamped = new Date(Date.now() - 120_000);
        await consumer({ dedupeWindowMs: 60_000, latePolicy: 'process' }).handle(testMessage('m1', { id: 'm1' }, { timestamp: stamped }));
        const outcome = await consumer({ dedupeWindowMs: 60_000 }).handle(testMessage('m1', { id: 'm1' }, { timestamp: stamped }));
        expect(outcome.status).toBe('duplicate');
      });

      it('processes late messages with latePolicy process', async () => {
        const c = consumer({ dedupeWindowMs: 60_000, latePolicy: 'process' });
        const outcome = await c.handle(testMessage('late', { id: 'late' }, { timestamp: new Date(Date.now() - 120_000) }));
        expect(outcome.status).toBe('processed');
      });

      it('prunes only expired completed rows, and only of the chosen consumer', async () => {
        const short = consumer({ dedupeWindowMs: 1, maxAttempts: 2 }, (id) => {
          if (id.startsWith('fail')) throw new Error('no');
          if (id.startsWith('dead')) throw new PermanentError('no');
        });
        for (const id of ['done-1', 'done-2', 'done-3', 'fail-1', 'dead-1']) await short.handle(testMessage(id));
        await attemptLedgerOf(short)!.recordAttemptsStarted([testMessage('started-1')]);
        const otherName = `${consumerName}-other`;
        const other = idempotentConsumer<unknown, Tx>({
          name: otherName,
          store: subject.store,
          dedupeWindowMs: 1,
          maxAttempts: 1,
          handler: async (m, { tx }) => subject.applyEffect(tx, otherName, m.id),
        });
        await other.handle(testMessage('done-x'));
        await sleep(30);
        expect(await subject.store.prune({ consumer: consumerName, dryRun: true })).toMatchObject({ status: 'dry-run', deleted: 3 });
        const result = await subject.store.prune({ consumer: consumerName, batchSize: 2 });
        expect(result).toMatchObject({ status: 'pruned', deleted: 3, batches: 2 });
        const left = await subject.store.findRows(consumerName, ['done-1', 'done-2', 'done-3', 'fail-1', 'dead-1', 'started-1']);
        expect(left.map((r) => `${r.messageId}:${r.status}`).sort()).toEqual(['dead-1:dead_lettered', 'fail-1:failed', 'started-1:processing']);
        expect(await subject.store.findRows(otherName, ['done-x'])).toHaveLength(1);
        expect((await subject.store.prune({ consumer: otherName })).deleted).toBe(1);
      });
    });

    describe('leased mode', () => {
      it('answers lease-held to a duplicate during a live lease and hands the same downstream key to every attempt', async () => {
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        const keys: string[] = [];
        const c = consumer({ mode: 'leased', leaseMs: 60_000, handlerTimeoutMs: 30_000 });
        const leased = idempotentConsumer<unknown, Tx>({
          ...c.config,
          handler: async (m, context) => {
            keys.push(context.downstreamKey);
            if (keys.length === 1) await gate;
            await subject.applyEffect(context.tx, consumerName, m.id);
          },
        });
        const first = leased.handle(testMessage('m1'));
        await waitFor(() => keys.length === 1);
        const second = await leased.handle(testMessage('m1'));
        expect(second).toMatchObject({ status: 'retry', reason: 'lease-held' });
        expect((second as { delayMs: number }).delayMs).toBeGreaterThan(50_000);
        const [processing] = await subject.store.listProcessing({ consumer: consumerName });
        expect(processing).toMatchObject({ messageId: 'm1', lease: 'live' });
        release();
        expect((await first).status).toBe('processed');
        expect(await leased.handle(testMessage('m1'))).toMatchObject({ status: 'duplicate' });
        expect(keys).toEqual([downstreamKey(consumerName, 'm1')]);
        expect(await effects('m1')).toBe(1);
      });

      it('lets a new worker take an expired lease over and fences the stale holder off', async () => {
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        let calls = 0;
        const config = {
          name: consumerName,
          store: subject.store,
          mode: 'leased' as const,
          leaseMs: 200,
          handlerTimeoutMs: 100,
          backoff: { initialDelayMs: 0, maxDelayMs: 0 },
          handler: async (m: { id: string }, context: { tx: Tx; attempt: number }) => {
            calls++;
            if (calls === 1) await gate; // the stale holder ignores its aborted signal
            await subject.applyEffect(context.tx, consumerName, m.id);
          },
        };
        const stale = idempotentConsumer<unknown, Tx>(config);
        const fresh = idempotentConsumer<unknown, Tx>(config);
        const first = stale.handle(testMessage('m1'));
        await waitFor(() => calls === 1);
        await sleep(300);
        expect(await fresh.handle(testMessage('m1'))).toMatchObject({ status: 'processed', attempt: 2 });
        release();
        expect(await first).toMatchObject({ status: 'retry', reason: 'lease-lost' });
        expect(await effects('m1')).toBe(1);
        const [row] = await subject.store.findRows(consumerName, ['m1']);
        expect(row).toMatchObject({ status: 'completed', claimedFrom: 'lease-expired', attempts: 2 });
      });

      it('records a leased failure and retries it', async () => {
        const c = consumer({ mode: 'leased', leaseMs: 60_000, handlerTimeoutMs: 30_000 }, (_id, attempt) => {
          if (attempt === 1) throw new Error('downstream 503');
        });
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'retry', attempt: 1, reason: 'handler-error' });
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'processed', attempt: 2 });
        expect(await effects('m1')).toBe(1);
      });
    });

    describe('batches', () => {
      it('isolates a failing message, keeps input order, and applies a repeated id once', async () => {
        const c = consumer({}, (id) => {
          if (id === 'bad') throw new Error('bad one');
        });
        await c.handle(testMessage('old'));
        const outcomes = await c.handleBatch([
          testMessage('a'),
          testMessage('bad'),
          testMessage('b'),
          testMessage('a'),
          testMessage('old'),
          testMessage(undefined),
        ]);
        expect(outcomes.map((o: Outcome) => `${o.messageId ?? '-'}:${o.status}`)).toEqual([
          'a:processed',
          'bad:retry',
          'b:processed',
          'a:duplicate',
          'old:duplicate',
          '-:dead-letter',
        ]);
        expect(await effects('a')).toBe(1);
        expect(await effects('b')).toBe(1);
        expect(await effects('bad')).toBe(0);
        const [bad] = await subject.store.findRows(consumerName, ['bad']);
        expect(bad).toMatchObject({ status: 'failed', attempts: 1 });
        expect(await c.handle(testMessage('bad'))).toMatchObject({ status: 'retry', attempt: 2 });
      });

      it('splits large batches and still applies each message once', async () => {
        const c = consumer();
        const ids = Array.from({ length: 120 }, (_, i) => `m${i}`);
        const outcomes = await c.handleBatch(ids.map((id) => testMessage(id)));
        expect(outcomes.every((o) => o.status === 'processed')).toBe(true);
        const again = await c.handleBatch(ids.map((id) => testMessage(id)));
        expect(again.every((o) => o.status === 'duplicate')).toBe(true);
        expect(await effects()).toBe(120);
      });
    });

    describe('duplicates in flight with their original', () => {
      it('answers a duplicate that arrives while its original runs as duplicate once the original commits', async () => {
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        let runs = 0;
        const c = consumer({}, async () => {
          runs++;
          await gate;
        });
        const original = c.handle(testMessage('m1'));
        await waitFor(() => runs === 1);
        const duplicate = c.handle(testMessage('m1'));
        await sleep(20);
        release();
        expect(await original).toMatchObject({ status: 'processed' });
        expect(await duplicate).toEqual({ status: 'duplicate', messageId: 'm1', reason: 'completed' });
        expect(runs).toBe(1);
        expect(await effects('m1')).toBe(1);
      });

      it('answers a repeat inside a batch from the batch itself, and a batch running beside the original once it commits', async () => {
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        let runs = 0;
        const c = consumer({}, async (id) => {
          runs++;
          if (id === 'slow') await gate;
        });
        const first = c.handleBatch([testMessage('slow'), testMessage('a'), testMessage('slow')]);
        await waitFor(() => runs === 1);
        const second = c.handleBatch([testMessage('b'), testMessage('slow')]);
        await sleep(20);
        release();
        expect((await first).map((o) => `${o.messageId}:${o.status}`)).toEqual(['slow:processed', 'a:processed', 'slow:duplicate']);
        expect((await second).map((o) => `${o.messageId}:${o.status}`)).toEqual(['b:processed', 'slow:duplicate']);
        for (const id of ['slow', 'a', 'b']) expect(await effects(id)).toBe(1);
      });
    });

    describe('statement handlers', () => {
      /** A consumer whose handler is the subject's statement, built by `build` unless it throws. */
      function statements(
        overrides: Partial<IdempotentConsumerConfig<unknown, Tx>> = {},
        failWith?: (id: string) => Error | undefined,
      ): IdempotentConsumer<unknown, Tx> {
        return idempotentConsumer<unknown, Tx>({
          name: consumerName,
          store: subject.store,
          backoff: { initialDelayMs: 0, maxDelayMs: 0, jitter: 'none' },
          handler: statementHandler((m) => {
            const error = failWith?.(m.id);
            if (error !== undefined) throw error;
            return subject.statementEffect!(consumerName, m.id);
          }) as never,
          ...overrides,
        });
      }
      const supported = (): boolean => subject.statementEffect !== undefined;

      it('applies a statement handler once, answers duplicate, and keeps the payload check', async () => {
        if (!supported()) return;
        const c = statements();
        expect(await c.handle(testMessage('m1'))).toMatchObject({ status: 'processed', attempt: 1 });
        expect(await c.handle(testMessage('m1'))).toEqual({ status: 'duplicate', messageId: 'm1', reason: 'completed' });
        expect(await c.handle(testMessage('m1', { other: true }))).toMatchObject({ status: 'dead-letter', reason: 'payload-mismatch' });
        const outcomes = await Promise.all(Array.from({ length: 8 }, () => c.handle(testMessage('m2'))));
        expect(outcomes.filter((o) => o.status === 'processed')).toHaveLength(1);
        for (const o of outcomes) expect(['processed', 'duplicate', 'retry']).toContain(o.status);
        expect(await effects('m1')).toBe(1);
        expect(await effects('m2')).toBe(1);
        const [row] = await subject.store.findRows(consumerName, ['m1']);
        expect(row).toMatchObject({ status: 'completed', attempts: 1 });
      });

      it('retries a failing statement handler after its delay, takes the due retry over, and dead-letters a permanent failure', async () => {
        if (!supported()) return;
        const failing = new Map<string, Error>([
          ['later', new RetryableError('not yet', { delayMs: 60_000 })],
          ['due', new RetryableError('once', { delayMs: 0 })],
          ['poison', new PermanentError('never')],
        ]);
        const c = statements({}, (id) => failing.get(id));
        expect(await c.handle(testMessage('later'))).toMatchObject({ status: 'retry', reason: 'handler-error', attempt: 1, delayMs: 60_000 });
        expect(await c.handle(testMessage('later'))).toMatchObject({ status: 'retry', reason: 'handler-error', attempt: 0 });
        expect(await c.handle(testMessage('due'))).toMatchObject({ status: 'retry', attempt: 1 });
        failing.delete('due');
        expect(await c.handle(testMessage('due'))).toMatchObject({ status: 'processed', attempt: 2 });
        expect(await c.handle(testMessage('poison'))).toMatchObject({ status: 'dead-letter', reason: 'permanent-error', attempts: 1 });
        failing.delete('poison');
        expect(await c.handle(testMessage('poison', { id: 'poison' }, { replay: { replayId: 'r1' } }))).toMatchObject({ status: 'processed', attempt: 1 });
        expect(await c.handle(testMessage('poison', { id: 'poison' }, { replay: { replayId: 'r1' } }))).toMatchObject({ status: 'duplicate' });
        await attemptLedgerOf(c)!.recordAttemptsStarted([testMessage('started')]);
        expect(await c.handle(testMessage('started'))).toMatchObject({ status: 'processed', attempt: 1 });
        expect(await effects('later')).toBe(0);
        for (const id of ['due', 'poison', 'started']) expect(await effects(id)).toBe(1);
        const [later] = await subject.store.findRows(consumerName, ['later']);
        expect(later).toMatchObject({ status: 'failed', attempts: 1, lastError: { message: 'not yet' } });
      });

      it('runs a batch of statement handlers: a failing one isolated, repeats and known ids answered, a due retry taken over', async () => {
        if (!supported()) return;
        const failing = new Set(['bad', 'flaky']);
        const c = statements({}, (id) => (failing.has(id) ? new Error(`${id} fails`) : undefined));
        await c.handle(testMessage('old'));
        expect(await c.handle(testMessage('flaky'))).toMatchObject({ status: 'retry', attempt: 1 });
        failing.delete('flaky');
        const outcomes = await c.handleBatch([
          testMessage('a'),
          testMessage('bad'),
          testMessage('flaky'),
          testMessage('a'),
          testMessage('old'),
          testMessage('b'),
        ]);
        expect(outcomes.map((o) => `${o.messageId}:${o.status}:${o.status === 'processed' ? o.attempt : ''}`)).toEqual([
          'a:processed:1',
          'bad:retry:',
          'flaky:processed:2',
          'a:duplicate:',
          'old:duplicate:',
          'b:processed:1',
        ]);
        for (const id of ['a', 'flaky', 'old', 'b']) expect(await effects(id)).toBe(1);
        expect(await effects('bad')).toBe(0);
        const [bad] = await subject.store.findRows(consumerName, ['bad']);
        expect(bad).toMatchObject({ status: 'failed', attempts: 1 });
      });
    });

    describe('inspection', () => {
      it('counts rows by status and reports rows expiring soon', async () => {
        const c = consumer({ maxAttempts: 2, dedupeWindowMs: 60_000 }, (id) => {
          if (id === 'f') throw new Error('x');
        });
        for (const id of ['a', 'b', 'f']) await c.handle(testMessage(id));
        expect(await subject.store.countByStatus({ consumer: consumerName })).toEqual([
          { consumer: consumerName, status: 'completed', count: 2 },
          { consumer: consumerName, status: 'failed', count: 1 },
        ]);
        expect(await subject.store.countExpiringSoon({ consumer: consumerName, withinMs: 120_000 })).toEqual([
          { consumer: consumerName, count: 2 },
        ]);
        expect(await subject.store.countExpiringSoon({ consumer: consumerName, withinMs: 1_000 })).toEqual([]);
        expect((await subject.store.findRows(consumerName, ['a', 'zz'])).map((r) => r.messageId)).toEqual(['a']);
      });
    });

    describe('identity', () => {
      it('names its inbox with one non-empty string, the same on every call and for concurrent callers', async (ctx) => {
        const store = subject.store;
        if (store.identity === undefined) return ctx.skip();
        const first = await store.identity();
        expect(typeof first).toBe('string');
        expect(first.trim()).not.toBe('');
        const again = await Promise.all(Array.from({ length: 5 }, () => store.identity!()));
        expect(new Set([first, ...again])).toEqual(new Set([first]));
      });

      it('is the same for another store over the same inbox, and different for a store over another', async (ctx) => {
        if (subject.store.identity === undefined || (subject.sameInbox === undefined && subject.otherInbox === undefined)) {
          return ctx.skip();
        }
        const mine = await subject.store.identity();
        if (subject.sameInbox !== undefined) expect(await subject.sameInbox().identity?.()).toBe(mine);
        if (subject.otherInbox !== undefined) {
          const other = await subject.otherInbox().identity?.();
          expect(other).toBeDefined();
          expect(other).not.toBe(mine);
        }
      });
    });
  });
}

async function waitFor(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(2);
  }
}
