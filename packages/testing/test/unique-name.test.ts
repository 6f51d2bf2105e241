import { describe, expect, it } from 'vitest';

import { UNIQUE_NAME_MAX_LENGTH, uniqueName } from '../src/index.js';

describe('uniqueName', () => {
  it('returns distinct names valid for Kafka topics, AMQP queues and SQS queues', () => {
    const names = Array.from({ length: 10_000 }, () => uniqueName('orders'));
    expect(new Set(names).size).toBe(names.length);
    for (const name of names.slice(0, 100)) {
      expect(name).toMatch(/^orders-[A-Za-z0-9_-]+$/);
      expect(name.length).toBeLessThanOrEqual(UNIQUE_NAME_MAX_LENGTH);
    }
  });

  it('replaces invalid characters, cuts a long prefix and leaves room for .fifo', () => {
    const name = uniqueName(`weird prefix/with.dots:${'x'.repeat(200)}`);
    expect(name).toMatch(/^weird-prefix-with-dots-x+-[a-z0-9]+-[a-z0-9]+-[0-9a-f]{10}$/);
    expect(`${name}.fifo`.length).toBeLessThanOrEqual(UNIQUE_NAME_MAX_LENGTH);
  });

  it('works without a prefix or with an empty one', () => {
    expect(uniqueName()).toMatch(/^inboxkit-/);
    expect(uniqueName('')).toMatch(/^[a-z0-9]+-[a-z0-9]+-[0-9a-f]{10}$/);
  });
});
