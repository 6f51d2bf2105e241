// Test 6 of the issue: bad input never throws past handle(); it becomes a typed dead letter (or, for a store
// that cannot be reached, a retry), and the handler never sees it.

import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { attemptLedgerOf } from '../src/delivery/attempt-ledger.js';
import { idempotentConsumer } from '../src/idempotent-consumer.js';
import { InMemoryInboxStore, type InMemoryTransaction } from '../src/memory/index.js';
import { PostgresInboxStore } from '../src/postgres/index.js';
import type { InboundMessage } from '../src/message.js';
import type { IdempotentConsumerConfig } from '../src/consumer-types.js';

const message = (id: string | undefined, body: InboundMessage['body'] = '{"ok":true}', extra: Partial<InboundMessage> = {}): InboundMessage => ({
  id,
  body,
  headers: {},
  source: { transport: 'memory' },
  ...extra,
});

function setup(overrides: Partial<IdempotentConsumerConfig<unknown, InMemoryTransaction>> = {}) {
  const store = new InMemoryInboxStore();
  let runs = 0;
  const consumer = idempotentConsumer<unknown, InMemoryTransaction>({
    name: 'bad-input',
    store,
    handler: async (m, { tx }) => {
      runs++;
      tx.stage(m.id);
    },
    ...overrides,
  });
  return { store, consumer, runs: () => runs };
}

describe('bad input', () => {
  it('dead-letters a message without id as missing-id', async () => {
    const { consumer, runs } = setup();
    expect(await consumer.handle(message(undefined))).toMatchObject({
      status: 'dead-letter',
      messageId: undefined,
      reason: 'missing-id',
      attempts: 0,
      error: { name: 'InvalidMessageIdError' },
    });
    expect(runs()).toBe(0);
  });

  it.each([
    ['an empty id', '', /empty/],
    ['an id over the default limit of 512 characters', 'x'.repeat(513), /513 characters, over the limit of 512/],
    ['an id with a control character', 'a\u0000b', /non-printable/],
    ['an id with a newline', 'a\nb', /non-printable/],
    ['an id with a lone surrogate', 'a\uD800', /non-printable/],
    ['an id with a noncharacter', 'a\uFFFFb', /non-printable/],
    ['an id with another noncharacter', 'a\uFDD0b', /non-printable/],
    ['an id of one space', ' ', /only of characters that show nothing.*U\+0020/],
    ['an id of spaces and no-break spaces', '  \u00A0\u3000', /only of characters that show nothing/],
    ['an id of zero-width characters', '\u200B\u200C\u200D\u2060\uFEFF', /U\+200B U\+200C U\+200D U\+2060 U\+FEFF/],
    ['an id of bidi controls', '\u202E\u2066\u2069\u200E\u200F\u061C', /only of characters that show nothing/],
    ['an id of a line separator and a soft hyphen', '\u2028\u00AD', /only of characters that show nothing/],
    ['an id of twenty zero-width spaces', '\u200B'.repeat(20), /U\+200B … \(20 in all\)/],
  ])('dead-letters %s as invalid-id', async (_label, id, detail) => {
    const { consumer, runs } = setup();
    const outcome = await consumer.handle(message(id));
    expect(outcome).toMatchObject({ status: 'dead-letter', reason: 'invalid-id', attempts: 0 });
    expect((outcome as { error: { message: string; name: string } }).error.message).toMatch(detail);
    expect((outcome as { error: { message: string; name: string } }).error.name).toBe('InvalidMessageIdError');
    expect(runs()).toBe(0);
  });

  it('accepts ids that hold invisible characters beside visible ones', async () => {
    const { consumer } = setup();
    for (const id of ['a\u200Bb', ' order-1', 'e\u0301', '\u202Eabc', 'x\u00A0y']) {
      expect((await consumer.handle(message(id))).status, JSON.stringify(id)).toBe('processed');
    }
  });

  it('accepts an id of exactly the limit, and honours a custom limit', async () => {
    expect((await setup().consumer.handle(message('x'.repeat(512)))).status).toBe('processed');
    const { consumer } = setup({ maxMessageIdLength: 8 });
    expect((await consumer.handle(message('123456789'))).status).toBe('dead-letter');
    expect((await consumer.handle(message('12345678'))).status).toBe('processed');
  });

  it('accepts ids with spaces, quotes and non-Latin characters', async () => {
    const { consumer } = setup();
    for (const id of ["it's \"quoted\"", 'ünïcödé-日本-🚀', 'back\\slash', 'a b']) {
      expect((await consumer.handle(message(id))).status).toBe('processed');
    }
  });

  it.each([
    ['not JSON', 'not json'],
    ['an empty body', ''],
    ['a null body', null],
    ['invalid UTF-8', new Uint8Array([0x7b, 0xff, 0xfe, 0x7d])],
  ])('dead-letters %s as undecodable and records it', async (_label, body) => {
    const { consumer, runs, store } = setup();
    expect(await consumer.handle(message('m1', body))).toMatchObject({
      status: 'dead-letter',
      reason: 'undecodable',
      error: { name: 'DecodeError' },
    });
    expect(runs()).toBe(0);
    expect((await store.listDeadLetters()).map((r) => [r.messageId, r.deadLetterReason])).toEqual([['m1', 'undecodable']]);
  });

  it('decodes UTF-8 bytes with a BOM', async () => {
    const { consumer } = setup();
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('{"a":1}')]);
    expect((await consumer.handle(message('m1', bytes))).status).toBe('processed');
  });

  it('dead-letters a payload that fails a zod schema (Standard Schema) as schema-invalid', async () => {
    const seen: unknown[] = [];
    const store = new InMemoryInboxStore();
    const consumer = idempotentConsumer({
      name: 'schema',
      store,
      schema: z.object({ orderId: z.string(), amount: z.number().positive() }),
      handler: async (m) => void seen.push(m.payload),
    });
    const outcome = await consumer.handle(message('m1', '{"orderId":"o1","amount":-3}'));
    expect(outcome).toMatchObject({ status: 'dead-letter', reason: 'schema-invalid', error: { name: 'SchemaValidationError' } });
    expect((outcome as { error: { message: string } }).error.message).toMatch(/amount/);
    expect((await consumer.handle(message('m2', '{"orderId":"o2","amount":3,"extra":1}'))).status).toBe('processed');
    expect(seen).toEqual([{ orderId: 'o2', amount: 3 }]);
  });

  it('answers retry, not dead-letter, when a rejected message cannot be recorded in the inbox', async () => {
    const store = new InMemoryInboxStore();
    const consumer = idempotentConsumer({
      name: 'schema-store-down',
      store,
      schema: z.object({ amount: z.number().positive() }),
      handler: async () => {},
    });
    store.setAvailable(false);
    const bad = message('m1', '{"amount":-3}');
    expect(await consumer.handle(bad)).toMatchObject({ status: 'retry', reason: 'store-unavailable' });
    expect(await consumer.handleBatch([bad])).toMatchObject([{ status: 'retry', reason: 'store-unavailable' }]);
    store.setAvailable(true);
    expect(await consumer.handle(bad)).toMatchObject({ status: 'dead-letter', reason: 'schema-invalid' });
    expect(await store.findRows('schema-store-down', ['m1'])).toMatchObject([
      { messageId: 'm1', status: 'dead_lettered', deadLetterReason: 'schema-invalid' },
    ]);
  });

  it('accepts a safeParse-style schema', async () => {
    const store = new InMemoryInboxStore();
    const consumer = idempotentConsumer({
      name: 'safe-parse',
      store,
      schema: {
        safeParse: (v: unknown) =>
          typeof v === 'number' ? { success: true as const, data: v } : { success: false as const, error: { issues: [{ message: 'want a number' }] } },
      },
      handler: async () => {},
    });
    expect(await consumer.handle(message('m1', '"text"'))).toMatchObject({ status: 'dead-letter', reason: 'schema-invalid' });
    expect((await consumer.handle(message('m2', '42'))).status).toBe('processed');
  });

  it('dead-letters a throwing custom decoder as undecodable', async () => {
    const { consumer } = setup({
      decode: () => {
        throw new Error('protobuf says no');
      },
    });
    expect(await consumer.handle(message('m1'))).toMatchObject({ status: 'dead-letter', reason: 'undecodable' });
  });

  it('never rejects when the handler throws something odd', async () => {
    for (const thrown of [undefined, null, 42, 'text', Symbol('s'), { weird: true }]) {
      const { consumer } = setup({ maxAttempts: 1, handler: async () => Promise.reject(thrown) });
      expect((await consumer.handle(message('m1'))).status).toBe('dead-letter');
    }
  });

  it('answers retry store-unavailable when the in-memory store is down, and never acks', async () => {
    const { consumer, store, runs } = setup();
    store.setAvailable(false);
    expect(await consumer.handle(message('m1'))).toMatchObject({ status: 'retry', reason: 'store-unavailable', error: { name: 'Error' } });
    expect(await consumer.handleBatch([message('m1'), message('m2')])).toMatchObject([
      { status: 'retry', reason: 'store-unavailable' },
      { status: 'retry', reason: 'store-unavailable' },
    ]);
    await expect(attemptLedgerOf(consumer)!.recordAttemptsStarted([message('m1')])).resolves.toBeUndefined();
    store.setAvailable(true);
    expect((await consumer.handle(message('m1'))).status).toBe('processed');
    expect(runs()).toBe(1);
  });

  it('answers retry store-unavailable when Postgres cannot be reached', async () => {
    const pool = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/none', connectionTimeoutMillis: 2_000 });
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
    try {
      const consumer = idempotentConsumer({ name: 'down', store: new PostgresInboxStore({ db }), handler: async () => {} });
      const outcome = await consumer.handle(message('m1'));
      expect(outcome).toMatchObject({ status: 'retry', reason: 'store-unavailable', error: { name: 'StoreUnavailableError' } });
      expect((outcome as { delayMs: number }).delayMs).toBeGreaterThan(0);
      expect(await consumer.handleBatch([message('a'), message('b')])).toMatchObject([
        { status: 'retry', reason: 'store-unavailable' },
        { status: 'retry', reason: 'store-unavailable' },
      ]);
    } finally {
      await db.destroy();
    }
  });

  it('refuses schema and table names that are not plain identifiers', () => {
    const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool() }) });
    for (const bad of ['inbox"; drop table x; --', 'a b', '1abc', '', 'x'.repeat(64)]) {
      expect(() => new PostgresInboxStore({ db, table: bad })).toThrow(/plain identifier|at most/);
      expect(() => new PostgresInboxStore({ db, schema: bad })).toThrow(/plain identifier|at most/);
    }
    expect(new PostgresInboxStore({ db, schema: 'app_1', table: 'Inbox_2' }).names.qualifiedTable).toBe('"app_1"."Inbox_2"');
  });
});
