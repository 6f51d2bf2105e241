// Hardening issue, item 3: a message whose headers fit when it was produced but not once the dead-letter (or
// retry) headers are added. amqplib encodes a header table into a 64 KiB buffer and throws a RangeError past
// it; that deterministic refusal used to be handled like a broker outage — the original held and requeued,
// without end on a classic queue, and on a quorum queue until the broker dead-lettered it after its delivery
// limit with no inboxkit record. Now the copy falls back to a smaller form (core's dead-letter forms) and the
// original is acked once the smaller copy is confirmed. On both queue types, against the real broker.

import {
  HEADERS,
  idempotentConsumer,
  MINIMAL_ID_LENGTH,
  PermanentError,
  RetryableError,
} from '@inboxkit/core';
import { InMemoryInboxStore } from '@inboxkit/core/memory';
import { OutcomeRecorder, uniqueName } from '@inboxkit/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { useSharedBroker } from './broker-lock.js';
import { rabbitmqHarness, TEST_TOPOLOGY } from './rabbitmq-harness.js';
import type { RabbitmqHarness } from './rabbitmq-harness.js';

useSharedBroker();

const harnesses: RabbitmqHarness[] = [];
afterEach(async () => {
  await Promise.all(harnesses.splice(0).map((h) => h.dispose()));
});

const wait = { timeoutMs: 30_000 };

/** AMQP field-table bytes of string headers: 4 for the length, then per entry name length, name, 'S', length, value. */
function tableBytes(headers: Record<string, string>): number {
  let n = 4;
  for (const [k, v] of Object.entries(headers)) n += 1 + Buffer.byteLength(k) + 1 + 4 + Buffer.byteLength(v);
  return n;
}

/** Headers of `total` field-table bytes (with `message-id`): they fit amqplib's 64 KiB when published. */
function bulkyHeaders(id: string, total: number): Record<string, string> {
  const headers: Record<string, string> = { 'message-id': id };
  for (let i = 0; tableBytes(headers) + 10_000 < total; i++) headers[`x-blob-${i}`] = 'b'.repeat(9_000);
  headers['x-blob-last'] = '';
  headers['x-blob-last'] = 'b'.repeat(total - tableBytes(headers));
  expect(tableBytes(headers)).toBe(total);
  return headers;
}

for (const queueType of ['classic', 'quorum'] as const) {
  describe(`a copy too large for amqplib's header table (${queueType} queue)`, () => {
    async function setup(
      handler: (id: string, attempt: number) => void,
    ): Promise<{ h: RabbitmqHarness; recorder: OutcomeRecorder; calls: Map<string, number> }> {
      const h = await rabbitmqHarness({
        topology: {
          ...TEST_TOPOLOGY,
          queueType,
          deliveryLimit: queueType === 'quorum' ? TEST_TOPOLOGY.deliveryLimit : undefined,
        },
      });
      harnesses.push(h);
      const recorder = new OutcomeRecorder();
      const calls = new Map<string, number>();
      const consumer = idempotentConsumer({
        name: uniqueName('rmq-oversized'),
        store: new InMemoryInboxStore(),
        backoff: { initialDelayMs: 100, maxDelayMs: 100, jitter: 'none' },
        handler: async (message, context) => {
          calls.set(message.id, (calls.get(message.id) ?? 0) + 1);
          handler(message.id, context.attempt);
        },
        hooks: { onOutcome: recorder.hook },
      });
      await h.start(consumer, { concurrency: 1, prefetch: 1 });
      return { h, recorder, calls };
    }

    it('dead-letters a message with ~60 KB of headers in a smaller form saying what it dropped; the messages behind it run; nothing loops', async () => {
      const big = uniqueName('big');
      const { h, recorder, calls } = await setup((id) => {
        if (id === big) throw new PermanentError(`refused: ${'why '.repeat(500)}`);
      });
      const after = [uniqueName('after'), uniqueName('after')];
      await h.publishRaw([
        // 62,000 bytes: with the 2,000-character error message and a stack that repeats it the full copy is over
        // 64 KiB by about 2 KB, and the compact one (no stack, message clipped to 500) under it by about 2 KB.
        // At 60,000 the full copy fit or not by the length of the stack's file paths (it fit in a CI clone).
        { body: '{"n":0}', options: { headers: bulkyHeaders(big, 62_000) } },
        ...after.map((id, n) => ({ body: `{"n":${n + 1}}`, options: { messageId: id } })),
      ]);
      for (const id of after) await recorder.waitFor(id, 'processed', wait);
      const letters = await h.readDeadLetters(1, 30_000);
      expect(letters).toHaveLength(1);
      const [letter] = letters;
      expect(letter?.id).toBe(big);
      expect(letter?.headers[HEADERS.reason]).toBe('permanent-error');
      expect(letter?.headers[HEADERS.consumer]).toMatch(/^rmq-oversized/);
      // The compact form fits: no stack, the error message clipped, the original headers kept.
      expect(letter?.headers[HEADERS.dropped]).toBe('error-stack,error-message-tail');
      expect(letter?.headers[HEADERS.errorStack]).toBeUndefined();
      expect(letter?.headers['x-blob-0']).toHaveLength(9_000);
      expect(letter?.body).toEqual(Buffer.from('{"n":0}'));
      // Dead-lettered once and settled: no requeue loop.
      expect(recorder.count('dead-letter', big)).toBe(1);
      expect(calls.get(big)).toBe(1);
      expect(await h.messageCount(h.queue)).toBe(0);
    });

    it('dead-letters a 40 KB message-id (invalid) with the id clipped in the minimal form', async () => {
      const { h, recorder } = await setup(() => undefined);
      const id = `${uniqueName('long')}-${'i'.repeat(40_000)}`;
      const next = uniqueName('next');
      await h.publishRaw([
        { body: '{}', options: { headers: { 'message-id': id } } },
        { body: '{}', options: { messageId: next } },
      ]);
      await recorder.waitFor(next, 'processed', wait);
      const letters = await h.readDeadLetters(1, 30_000);
      expect(letters).toHaveLength(1);
      const headers = letters[0]!.headers;
      expect(headers[HEADERS.reason]).toBe('invalid-id');
      expect(headers[HEADERS.messageId]).toHaveLength(MINIMAL_ID_LENGTH);
      expect(id.startsWith(headers[HEADERS.messageId]!.slice(0, 1_000))).toBe(true);
      expect(headers[HEADERS.dropped]).toContain('message-id-clipped');
      expect(recorder.count('dead-letter', id)).toBe(1);
      expect(await h.messageCount(h.queue)).toBe(0);
    });

    it('dead-letters, as retry-copy-too-large, a message whose delay-queue copy cannot carry its headers', async () => {
      const big = uniqueName('big-retry');
      const { h, recorder, calls } = await setup((id) => {
        if (id === big) throw new RetryableError('later', { delayMs: 100 });
      });
      const next = uniqueName('next');
      // Fits when published; the retry copy adds its attempt and source headers and no longer does.
      await h.publishRaw([
        { body: '{}', options: { headers: bulkyHeaders(big, 65_500) } },
        { body: '{}', options: { messageId: next } },
      ]);
      await recorder.waitFor(next, 'processed', wait);
      const letters = await h.readDeadLetters(1, 30_000);
      expect(letters).toHaveLength(1);
      expect(letters[0]!.id).toBe(big);
      expect(letters[0]!.headers[HEADERS.reason]).toBe('retry-copy-too-large');
      expect(letters[0]!.headers[HEADERS.dropped]).toContain('original-headers');
      expect(recorder.count('retry', big)).toBe(1);
      expect(calls.get(big)).toBe(1);
      expect(await h.messageCount(h.queue)).toBe(0);
    });
  });
}
