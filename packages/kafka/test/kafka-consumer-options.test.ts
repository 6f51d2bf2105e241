// Options are validated once, at creation, with messages that say what to change.
import { ConfigurationError, withAttemptLedger } from '@inboxkit/core';
import type { IdempotentConsumer } from '@inboxkit/core';
import { describe, expect, it } from 'vitest';

import { kafkaConsumer } from '../src/index.js';
import type { KafkaConsumerLike, KafkaConsumerOptions } from '../src/index.js';

const fn = async (): Promise<never> => {
  throw new Error('not called');
};
const consumer = {
  connect: fn,
  disconnect: fn,
  subscribe: fn,
  run: fn,
  stop: fn,
  commitOffsets: fn,
  seek() {},
  pause() {},
  resume() {},
  on: () => () => undefined,
} as unknown as KafkaConsumerLike;
const handler = withAttemptLedger({ name: 'c', config: {}, handle: fn, handleBatch: fn }, {
  recordAttemptsStarted: fn,
}) as unknown as IdempotentConsumer;
const producer = { connect: fn, disconnect: fn, sendBatch: fn };
const base: KafkaConsumerOptions = { consumer, producer, topics: ['orders'], handler };

function rejects(options: Partial<KafkaConsumerOptions>, message: RegExp): void {
  expect(() => kafkaConsumer({ ...base, ...options })).toThrow(ConfigurationError);
  expect(() => kafkaConsumer({ ...base, ...options })).toThrow(message);
}

describe('kafkaConsumer options', () => {
  it('fills the documented defaults and freezes them', () => {
    const { options } = kafkaConsumer(base);
    expect(options).toMatchObject({
      mode: 'message',
      partitionConcurrency: 1,
      keyConcurrency: 1,
      batchSize: 500,
      useCoordinatesAsId: false,
      tombstones: 'dead-letter',
      fromBeginning: false,
      closeTimeoutMs: 30_000,
      publishTimeoutMs: 30_000,
      pauseOnFailureMs: 1_000,
      heartbeatIntervalMs: 3_000,
    });
    expect(options.deadLetterTopic('orders')).toBe('orders.dlq');
    expect(Object.isFrozen(options)).toBe(true);
  });

  it.each(['every-batch', 'after-join'] as const)(
    "accepts the deprecated countStartedAttempts '%s', warns that it is ignored, and keeps no trace of it",
    (value) => {
      const warnings: string[] = [];
      const logger = {
        debug: () => undefined,
        info: () => undefined,
        warn: (_: object, message?: string) => warnings.push(message ?? ''),
        error: () => undefined,
      };
      const { options } = kafkaConsumer({ ...base, logger, countStartedAttempts: value });
      expect(warnings).toEqual([expect.stringMatching(/countStartedAttempts is deprecated and ignored/)]);
      expect(options).not.toHaveProperty('countStartedAttempts');
      warnings.length = 0;
      kafkaConsumer({ ...base, logger });
      expect(warnings).toEqual([]);
    },
  );

  it('rejects what cannot work, saying what to change', () => {
    rejects({ topics: [] }, /topics/);
    rejects({ topics: ['a', 'a'] }, /twice/);
    rejects({ producer: undefined }, /kafka.*or.*producer/);
    rejects({ kafka: { producer: () => producer } as never }, /not both/);
    rejects({ deadLetterTopic: () => 'orders' }, /loop/);
    rejects({ mode: 'bulk' as never }, /'message', 'batch'/);
    rejects({ tombstones: 'drop' as never }, /tombstones/);
    rejects({ partitionConcurrency: 0 }, /partitionConcurrency/);
    rejects({ mode: 'batch', keyConcurrency: 4 }, /keyConcurrency applies to mode 'message'/);
    rejects({ countStartedAttempts: 'never' as never }, /countStartedAttempts/);
    rejects({ closeTimeoutMs: 1.5 }, /closeTimeoutMs/);
    rejects({ consumer: {} as never }, /kafka.consumer/);
    rejects({ handler: {} as never }, /idempotentConsumer/);
    // A spread copy of a consumer has its methods but not its attempt ledger (not enumerable): rejected too.
    rejects({ handler: { ...handler } }, /idempotentConsumer/);
  });
});
