// Operations issue item 3: one downstream key per (consumer, message) is one key too few for a handler that
// calls the same provider twice. Against a provider that caches responses by Idempotency-Key alone (a real HTTP
// server in this process), the second call under the same key is answered with the first response and its
// effect never happens; per-step keys (`context.downstreamKeyFor(step)`) make both happen, and a redelivery of
// the message reuses both keys, so the provider applies each effect once. The inbox is real Postgres.

import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { downstreamKey, downstreamStepKey, MAX_DOWNSTREAM_STEP_LENGTH } from '../src/downstream-key.js';
import { ConfigurationError } from '../src/errors.js';
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

const message = (id: string): InboundMessage => ({
  id,
  body: JSON.stringify({ amount: 1000, fee: 30 }),
  headers: {},
  source: { transport: 'memory' },
});

/** What the fake provider applied: one entry per effect it really performed. */
interface Applied {
  readonly op: string;
  readonly amount: number;
  readonly key: string;
}

/**
 * A provider that, like many real ones, remembers the response of each Idempotency-Key and answers any later
 * request under that key with it, whatever the request (path or body) is.
 */
class KeyCachingProvider {
  readonly applied: Applied[] = [];
  readonly #cache = new Map<string, string>();
  #server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.#server = createServer((req, res) => void this.#serve(req, res));
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }

  reset(): void {
    this.applied.length = 0;
    this.#cache.clear();
  }

  async #serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string' || key === '') {
      res.writeHead(400).end('{"error":"Idempotency-Key required"}');
      return;
    }
    let answer = this.#cache.get(key);
    if (answer === undefined) {
      const { amount } = JSON.parse(body) as { amount: number };
      const op = req.url === '/refunds' ? 'refund' : 'charge';
      this.applied.push({ op, amount, key });
      answer = JSON.stringify({ id: `${op}_${this.applied.length}`, op, amount });
      this.#cache.set(key, answer);
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
  }
}

/** One POST to the provider; returns what it answered. */
async function call(
  provider: KeyCachingProvider,
  path: string,
  key: string,
  amount: number,
): Promise<{ id: string; op: string }> {
  const res = await fetch(`${provider.url}${path}`, {
    method: 'POST',
    headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify({ amount }),
  });
  if (!res.ok) throw new Error(`provider answered ${res.status}`);
  return (await res.json()) as { id: string; op: string };
}

describe('downstream keys per step, against a provider that caches by key alone', () => {
  let t: TestDatabase;
  const provider = new KeyCachingProvider();
  beforeAll(async () => {
    t = await openTestDatabase('downstream_steps', 4);
    await provider.start();
  });
  afterAll(async () => {
    await provider.stop();
    await t?.close();
  });
  beforeEach(() => provider.reset());

  it('with the one per-message key, the second call (the fee refund) never takes effect', async () => {
    const answers: { op: string }[] = [];
    const consumer = idempotentConsumer<{ amount: number; fee: number }, TestTx>({
      name: 'one-key',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      handler: async (m, { tx, downstreamKey: key }) => {
        answers.push(await call(provider, '/charges', key, m.payload.amount));
        answers.push(await call(provider, '/refunds', key, m.payload.fee));
        await insertEffect(tx, t.schema, 'one-key', m.id);
      },
    });
    expect((await consumer.handle(message('order-1'))).status).toBe('processed');
    // The failure the step keys exist for: the refund was answered with the charge's response, and only the
    // charge happened.
    expect(answers.map((a) => a.op)).toEqual(['charge', 'charge']);
    expect(provider.applied.map((a) => a.op)).toEqual(['charge']);
  });

  it('with a key per step, both effects happen, under distinct keys derived from (consumer, message, step)', async () => {
    const consumer = idempotentConsumer<{ amount: number; fee: number }, TestTx>({
      name: 'step-keys',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      // Destructured: downstreamKeyFor is bound to the run.
      handler: async (m, { tx, downstreamKeyFor }) => {
        await call(provider, '/charges', downstreamKeyFor('charge'), m.payload.amount);
        await call(provider, '/refunds', downstreamKeyFor('refund-fee'), m.payload.fee);
        await insertEffect(tx, t.schema, 'step-keys', m.id);
      },
    });
    expect((await consumer.handle(message('order-1'))).status).toBe('processed');
    expect(provider.applied).toEqual([
      { op: 'charge', amount: 1000, key: downstreamStepKey('step-keys', 'order-1', 'charge') },
      { op: 'refund', amount: 30, key: downstreamStepKey('step-keys', 'order-1', 'refund-fee') },
    ]);
    expect(new Set([...provider.applied.map((a) => a.key), downstreamKey('step-keys', 'order-1')]).size).toBe(
      3,
    );
  });

  it('a redelivery after both calls reuses both keys: the provider applies each effect once', async () => {
    const keysByAttempt: string[][] = [];
    const consumer = idempotentConsumer<{ amount: number; fee: number }, TestTx>({
      name: 'step-redelivery',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      backoff: { initialDelayMs: 0, maxDelayMs: 0 },
      handler: async (m, context) => {
        const keys = [context.downstreamKeyFor('charge'), context.downstreamKeyFor('refund-fee')];
        keysByAttempt.push(keys);
        await call(provider, '/charges', keys[0]!, m.payload.amount);
        await call(provider, '/refunds', keys[1]!, m.payload.fee);
        await insertEffect(context.tx, t.schema, 'step-redelivery', m.id);
        // Both downstream calls are made, then the attempt fails before its transaction commits.
        if (context.attempt < 3)
          throw new Error(`lost after the downstream calls (attempt ${context.attempt})`);
      },
    });
    expect((await consumer.handle(message('order-7'))).status).toBe('retry');
    expect((await consumer.handle(message('order-7'))).status).toBe('retry');
    expect((await consumer.handle(message('order-7'))).status).toBe('processed');
    expect((await consumer.handle(message('order-7'))).status).toBe('duplicate');

    expect(keysByAttempt).toHaveLength(3);
    expect(keysByAttempt[1]).toEqual(keysByAttempt[0]);
    expect(keysByAttempt[2]).toEqual(keysByAttempt[0]);
    expect(provider.applied.map((a) => [a.op, a.amount])).toEqual([
      ['charge', 1000],
      ['refund', 30],
    ]);
    expect(await countEffects(t.db, t.schema, 'step-redelivery', 'order-7')).toBe(1);
  });

  it('dead-letters a run whose step name is invalid, with a ConfigurationError saying what a step must be', async () => {
    const consumer = idempotentConsumer<unknown, TestTx>({
      name: 'bad-step',
      store: new PostgresInboxStore({ db: t.db, schema: t.schema }),
      handler: async (_m, { downstreamKeyFor }) => {
        await call(provider, '/charges', downstreamKeyFor(''), 1);
      },
    });
    const outcome = await consumer.handle(message('order-9'));
    expect(outcome).toMatchObject({ status: 'dead-letter', reason: 'permanent-error' });
    expect(outcome.status === 'dead-letter' ? outcome.error?.message : undefined).toMatch(
      /step name must be a string of 1-100 characters/,
    );
    expect(provider.applied).toEqual([]);
  });
});

describe('downstreamStepKey', () => {
  it('is a stable 36-character UUID: the same for the same (consumer, message, step), on every call', () => {
    const key = downstreamStepKey('billing', 'order-1', 'charge');
    expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(downstreamStepKey('billing', 'order-1', 'charge')).toBe(key);
    // Pinned: a release that changed the derivation would make a redelivery across the upgrade repeat effects.
    expect(key).toBe(PINNED_CHARGE_KEY);
  });

  it('differs per step, per message, per consumer, from the per-message key, and across field boundaries', () => {
    const keys = [
      downstreamStepKey('billing', 'order-1', 'charge'),
      downstreamStepKey('billing', 'order-1', 'Charge'),
      downstreamStepKey('billing', 'order-1', 'refund-fee'),
      downstreamStepKey('billing', 'order-2', 'charge'),
      downstreamStepKey('shipping', 'order-1', 'charge'),
      downstreamStepKey('a', 'bc', 'd'),
      downstreamStepKey('ab', 'c', 'd'),
      downstreamStepKey('a', 'b', 'cd'),
      downstreamStepKey('a', '1:b', 'c'),
      downstreamStepKey('a:1', 'b', 'c'),
      downstreamKey('billing', 'order-1'),
      downstreamKey('billing', 'order-1\u0000charge'),
    ];
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('refuses an empty, over-long, control-character or non-string step with a ConfigurationError', () => {
    const bad: unknown[] = [
      '',
      'x'.repeat(MAX_DOWNSTREAM_STEP_LENGTH + 1),
      'charge\n',
      'a\u0000b',
      undefined,
      42,
    ];
    for (const step of bad) {
      expect(() => downstreamStepKey('billing', 'order-1', step as string), String(step)).toThrow(
        ConfigurationError,
      );
    }
    expect(() => downstreamStepKey('billing', 'order-1', 'x'.repeat(MAX_DOWNSTREAM_STEP_LENGTH + 1))).toThrow(
      /got "x+" \(101 characters\)/,
    );
    expect(() => downstreamStepKey('billing', 'order-1', undefined as unknown as string)).toThrow(
      /got undefined \(undefined\)/,
    );
    expect(downstreamStepKey('billing', 'order-1', 'x'.repeat(MAX_DOWNSTREAM_STEP_LENGTH))).toHaveLength(36);
    expect(downstreamStepKey('billing', 'order-1', 'remboursement frais é')).toHaveLength(36);
  });
});

const PINNED_CHARGE_KEY = 'ee274bc0-967f-8c4d-88da-9d4d8a0c13ab';
