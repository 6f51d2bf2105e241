// The transport over the real Postgres inbox: duplicates published by the producer (30%) apply once each,
// and a poison message reaches the DLQ after maxAttempts with the documented headers while its inbox row
// says dead_lettered.

import { HEADERS, idempotentConsumer } from '@inboxkit/core';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import type { Transaction } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { useSharedBroker } from './broker-lock.js';
import { insertEffect, postgresFixture } from './postgres-fixture.js';
import type { EffectsDatabase } from './postgres-fixture.js';
import { rabbitmqHarness } from './rabbitmq-harness.js';

useSharedBroker();

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function setup(label: string) {
  const h = await rabbitmqHarness();
  cleanup.push(() => h.dispose());
  const pg = await postgresFixture(label);
  cleanup.push(() => pg.dispose());
  return { h, pg };
}

describe('rabbitmqConsumer over the Postgres inbox', () => {
  for (const maxBatchSize of [1, 8]) {
    it(`applies each id once when 30% of the messages are producer duplicates (batches of up to ${maxBatchSize})`, async () => {
      const { h, pg } = await setup('duplicates');
      const recorder = new OutcomeRecorder();
      const name = uniqueName('dups');
      const consumer = idempotentConsumer<unknown, Transaction<EffectsDatabase>>({
        name,
        store: pg.store,
        handler: insertEffect(pg.schema, name),
        hooks: { onOutcome: recorder.hook },
      });
      await h.start(consumer, { concurrency: maxBatchSize === 1 ? 8 : 2, maxBatchSize });
      const ids = Array.from({ length: 700 }, (_, n) => `pay-${n}`);
      const copies = ids.flatMap((id, n) => (n % 10 < 3 ? [id, id] : [id]));
      // Shuffle so a duplicate often arrives while its first copy is still in flight.
      for (let i = copies.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [copies[i], copies[j]] = [copies[j]!, copies[i]!];
      }
      await h.publish(copies.map((id) => ({ id, body: JSON.stringify({ id }) })));
      await recorder.waitForCount(copies.length, { status: ['processed', 'duplicate'], timeoutMs: 60_000 });

      const counts = await pg.effectCounts();
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
      expect(counts.size).toBe(ids.length);
      expect(recorder.counts()).toMatchObject({ processed: 700, duplicate: 210, 'dead-letter': 0 });
      await expect.poll(() => h.messageCount(h.queue)).toBe(0);
    });
  }

  it('dead-letters a poison message after maxAttempts with the documented headers; its row is dead_lettered', async () => {
    const { h, pg } = await setup('poison');
    const recorder = new OutcomeRecorder();
    const name = uniqueName('poison');
    const effect = insertEffect(pg.schema, name);
    const consumer = idempotentConsumer<{ poison?: boolean }, Transaction<EffectsDatabase>>({
      name,
      store: pg.store,
      maxAttempts: 3,
      backoff: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 400, jitter: 'none' },
      handler: async (message, context) => {
        await effect(message, context);
        if (message.payload.poison) throw new Error('cannot apply refund: account closed');
      },
      hooks: { onOutcome: recorder.hook },
    });
    await h.start(consumer);
    const [poison, fine] = [uniqueName('poison'), uniqueName('fine')];
    await h.publishRaw([
      {
        body: JSON.stringify({ poison: true }),
        options: {
          messageId: poison,
          timestamp: Math.floor(Date.now() / 1000),
          headers: { 'x-tenant': 't9' },
          contentType: 'application/json',
        },
      },
      { body: '{}', options: { messageId: fine } },
    ]);
    await recorder.waitFor(poison, 'dead-letter', { timeoutMs: 30_000 });
    const [letter, ...more] = await h.readDeadLetters(1, 10_000);
    expect(more).toEqual([]);
    expect(letter).toMatchObject({
      id: poison,
      headers: {
        [HEADERS.reason]: 'max-attempts',
        [HEADERS.attempts]: '3',
        [HEADERS.consumer]: name,
        [HEADERS.originalId]: poison,
        [HEADERS.messageId]: poison,
        [HEADERS.errorName]: 'Error',
        [HEADERS.errorMessage]: 'cannot apply refund: account closed',
        [HEADERS.sourceTransport]: 'rabbitmq',
        [HEADERS.sourceDestination]: h.queue,
        [HEADERS.sourceExchange]: '',
        [HEADERS.sourceRoutingKey]: h.queue,
        'x-tenant': 't9',
      },
    });
    for (const h2 of [
      HEADERS.firstFailureAt,
      HEADERS.lastFailureAt,
      HEADERS.deadLetteredAt,
      HEADERS.errorStack,
    ]) {
      expect(letter!.headers[h2], h2).toBeDefined();
    }
    expect(
      letter!.headers[HEADERS.attempt],
      'the delay-path counter is not carried into the DLQ',
    ).toBeUndefined();
    expect(Buffer.from(letter!.body as Uint8Array).toString()).toBe('{"poison":true}');
    expect(recorder.outcomes(poison).map((o) => o.status)).toEqual(['retry', 'retry', 'dead-letter']);
    const counts = await pg.effectCounts();
    expect(counts.get(fine)).toBe(1);
    expect(counts.has(poison), 'the failed attempts rolled back').toBe(false);
    expect(await pg.inboxStatuses()).toEqual({ completed: 1, dead_lettered: 1 });
    await expect.poll(() => h.messageCount(h.queue)).toBe(0);
  });
});
