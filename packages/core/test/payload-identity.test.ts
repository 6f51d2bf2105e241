// Issue 22, item 5: a changed payload under the same id is caught as payload-mismatch even where JSON.parse
// makes the two bodies equal (integers beyond 2^53, 1e400 vs null, duplicate members) or a custom decoder
// returns values without a JSON form (Map, Set); a re-encoding of the same value is still a duplicate.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IdempotentConsumerConfig } from '../src/consumer-types.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import type { InboundMessage } from '../src/message.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import {
  countEffects,
  insertEffect,
  openTestDatabase,
  type TestDatabase,
  type TestTx,
} from './support/postgres.js';

const message = (id: string, body: string): InboundMessage => ({
  id,
  body,
  headers: {},
  source: { transport: 'memory' },
});

describe('what counts as the same payload', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase('payload_identity');
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

  it.each([
    ['an integer beyond 2^53', '{"amount":9007199254740993}', '{"amount":9007199254740992}'],
    ['1e400 then null', '{"limit":1e400}', '{"limit":null}'],
    ['a duplicate member', '{"to":"alice","to":"mallory"}', '{"to":"mallory"}'],
  ])(
    'dead-letters %s under the same id as payload-mismatch, in handle() and handleBatch()',
    async (label, first, second) => {
      const name = `mismatch-${label.replaceAll(/\W/g, '-')}`;
      const consumer = consumerFor(name);
      expect((await consumer.handle(message('m1', first))).status).toBe('processed');
      expect(await consumer.handle(message('m1', second))).toMatchObject({
        status: 'dead-letter',
        reason: 'payload-mismatch',
      });
      expect(
        (await consumer.handleBatch([message('m1', second), message('m2', second)])).map((o) => o.status),
      ).toEqual(['dead-letter', 'processed']);
      expect(await consumer.handle(message('m2', first))).toMatchObject({
        status: 'dead-letter',
        reason: 'payload-mismatch',
      });
      expect(await countEffects(t.db, t.schema, name)).toBe(2);
    },
  );

  it('answers a re-encoding of the same value (order, spacing, 1.0 for 1, escapes) as a duplicate', async () => {
    const name = 'same-value';
    const consumer = consumerFor(name);
    expect(
      (await consumer.handle(message('m1', '{"id":9007199254740993,"amount":1.0,"who":"A"}'))).status,
    ).toBe('processed');
    for (const again of [
      '{ "who": "\\u0041", "amount": 1, "id": 9007199254740993 }',
      '{"amount":1e0,"id":9007199254740993.00,"who":"A"}',
    ]) {
      expect(await consumer.handle(message('m1', again))).toMatchObject({ status: 'duplicate' });
    }
    expect(await countEffects(t.db, t.schema, name)).toBe(1);
  });

  it('tells apart the Maps a custom decoder returns, and dead-letters one it cannot fingerprint as undecodable', async () => {
    const name = 'custom-decode';
    const consumer = consumerFor(name, {
      decode: (body) => {
        const text = typeof body === 'string' ? body : Buffer.from(body ?? []).toString();
        if (text === 'opaque') return new (class Opaque {})();
        return new Map(Object.entries(JSON.parse(text) as Record<string, unknown>));
      },
    });
    expect((await consumer.handle(message('m1', '{"amount":1}'))).status).toBe('processed');
    expect(await consumer.handle(message('m1', '{"amount":2}'))).toMatchObject({
      status: 'dead-letter',
      reason: 'payload-mismatch',
    });
    expect(await consumer.handle(message('m1', '{"amount":1}'))).toMatchObject({ status: 'duplicate' });
    const opaque = await consumer.handle(message('m2', 'opaque'));
    expect(opaque).toMatchObject({ status: 'dead-letter', reason: 'undecodable' });
    expect((opaque as { error: { message: string } }).error.message).toMatch(
      /cannot fingerprint a Opaque faithfully/,
    );
  });
});
