// Operations issue, item 4: identity the user controls. A producer retry that re-serialises with a fresh
// `sentAt` was dead-lettered as payload-mismatch, because the whole payload was fingerprinted. The consumer's
// `fingerprint` option (exclude / include / a function) decides what counts; a resolver that throws
// dead-letters the message as fingerprint-failed, once, without a retry.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IdempotentConsumerConfig } from '../src/consumer-types.js';
import { ConfigurationError } from '../src/errors.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import { countEffects, insertEffect, openTestDatabase, type TestDatabase, type TestTx } from './support/postgres.js';

const message = (id: string, payload: unknown): InboundMessage => ({
  id,
  body: JSON.stringify(payload),
  headers: {},
  source: { transport: 'memory' },
});

const first = { orderId: 'o-1', amount: 10, sentAt: '2026-12-04T10:00:00Z', meta: { traceId: 'a', tenant: 't1' } };
const resent = { orderId: 'o-1', amount: 10, sentAt: '2026-12-04T10:00:05Z', meta: { traceId: 'b', tenant: 't1' } };
const changed = { ...resent, amount: 11 };

describe('the consumer fingerprint option', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('fingerprint_resolver');
  });
  afterAll(async () => {
    await t?.close();
  });

  function consumerFor(name: string, overrides: Partial<IdempotentConsumerConfig<unknown, TestTx>> = {}) {
    return idempotentConsumer<unknown, TestTx>({
      name,
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      handler: async (m, { tx }) => insertEffect(tx, t.schema, name, m.id),
      ...overrides,
    });
  }

  it('without the option, a resend with a fresh sentAt is dead-lettered as payload-mismatch (the old behaviour)', async () => {
    const consumer = consumerFor('fp-none');
    expect((await consumer.handle(message('m1', first))).status).toBe('processed');
    expect(await consumer.handle(message('m1', resent))).toMatchObject({ status: 'dead-letter', reason: 'payload-mismatch' });
  });

  it("with exclude: ['sentAt', 'meta.traceId'], the resend is a duplicate; a changed amount is still a mismatch", async () => {
    const name = 'fp-exclude';
    const consumer = consumerFor(name, { fingerprint: { exclude: ['sentAt', 'meta.traceId'] } });
    expect((await consumer.handle(message('m1', first))).status).toBe('processed');
    expect(await consumer.handle(message('m1', resent))).toMatchObject({ status: 'duplicate' });
    expect((await consumer.handleBatch([message('m1', resent)]))[0]).toMatchObject({ status: 'duplicate' });
    expect(await consumer.handle(message('m1', changed))).toMatchObject({ status: 'dead-letter', reason: 'payload-mismatch' });
    expect(await countEffects(t.db, t.schema, name)).toBe(1);
  });

  it("with exclude: ['sentAt'] only, a changed meta.traceId still counts", async () => {
    const consumer = consumerFor('fp-exclude-top', { fingerprint: { exclude: ['sentAt'] } });
    expect((await consumer.handle(message('m1', first))).status).toBe('processed');
    expect(await consumer.handle(message('m1', { ...first, sentAt: 'later' }))).toMatchObject({ status: 'duplicate' });
    expect(await consumer.handle(message('m1', resent))).toMatchObject({ status: 'dead-letter', reason: 'payload-mismatch' });
  });

  it("with include: ['orderId', 'amount', 'meta.tenant'], only those count", async () => {
    const name = 'fp-include';
    const consumer = consumerFor(name, { fingerprint: { include: ['orderId', 'amount', 'meta.tenant'] } });
    expect((await consumer.handle(message('m1', first))).status).toBe('processed');
    expect(await consumer.handle(message('m1', { ...resent, extra: 'noise' }))).toMatchObject({ status: 'duplicate' });
    expect(await consumer.handle(message('m1', { ...resent, meta: { tenant: 't2' } }))).toMatchObject({
      status: 'dead-letter',
      reason: 'payload-mismatch',
    });
    expect(await countEffects(t.db, t.schema, name)).toBe(1);
  });

  it('with a function, its result is what counts (canonically: key order does not matter)', async () => {
    const consumer = consumerFor('fp-function', {
      fingerprint: (m) => {
        const p = m.payload as typeof first;
        return { amount: p.amount, order: p.orderId };
      },
    });
    expect((await consumer.handle(message('m1', first))).status).toBe('processed');
    expect(await consumer.handle(message('m1', resent))).toMatchObject({ status: 'duplicate' });
    expect(await consumer.handle(message('m1', changed))).toMatchObject({ status: 'dead-letter', reason: 'payload-mismatch' });
  });

  it('a function that throws dead-letters the message as fingerprint-failed, unrun and never retried', async () => {
    const name = 'fp-throws';
    let calls = 0;
    const consumer = consumerFor(name, {
      fingerprint: (m) => {
        calls++;
        const p = m.payload as Partial<typeof first>;
        if (p.orderId === undefined) throw new Error('no orderId');
        return p.orderId;
      },
    });
    const outcome = await consumer.handle(message('bad', { amount: 1 }));
    expect(outcome).toMatchObject({ status: 'dead-letter', reason: 'fingerprint-failed' });
    expect(JSON.stringify(outcome)).toContain('no orderId');
    // Redelivered: dead-lettered again at once, not a retry loop; the handler never ran.
    expect(await consumer.handle({ ...message('bad', { amount: 1 }), deliveryCount: 2 })).toMatchObject({
      status: 'dead-letter',
      reason: 'fingerprint-failed',
    });
    expect(calls).toBe(2);
    expect(await countEffects(t.db, t.schema, name)).toBe(0);
    // The consumer is alive: the next message is processed.
    expect((await consumer.handle(message('good', first))).status).toBe('processed');
  });

  it('a function answering what cannot be fingerprinted (a cycle) is fingerprint-failed too', async () => {
    const consumer = consumerFor('fp-cycle', {
      fingerprint: () => {
        const a: Record<string, unknown> = {};
        a.self = a;
        return a;
      },
    });
    expect(await consumer.handle(message('m1', first))).toMatchObject({ status: 'dead-letter', reason: 'fingerprint-failed' });
  });

  it.each([
    [{ include: ['a'], exclude: ['b'] }, /not both/],
    [{ exclude: [] }, /non-empty array/],
    [{ exclude: [''] }, /invalid path ""/],
    [{ include: ['a..b'] }, /invalid path "a\.\.b"/],
    [{ include: [3] }, /invalid path 3/],
    [{}, /needs include/],
    ['sentAt', /must be \{ include/],
  ])('refuses fingerprint %j at start-up', (fingerprint, message) => {
    expect(() => consumerFor('fp-bad', { fingerprint: fingerprint as never })).toThrow(ConfigurationError);
    expect(() => consumerFor('fp-bad', { fingerprint: fingerprint as never })).toThrow(message);
  });
});
