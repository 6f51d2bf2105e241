// The producer's id is preferred over anything SQS assigns; SQS's MessageId is only an opt-in fallback.
import { describe, expect, it } from 'vitest';
import { resolveMessageId } from '../src/message-id.js';

const defaults = {
  messageIdAttribute: 'message-id',
  messageIdBodyField: undefined,
  useSqsMessageIdAsId: false,
};

describe('resolveMessageId', () => {
  it('reads the message-id attribute first', () => {
    expect(
      resolveMessageId({ 'message-id': 'attr' }, '{"id":"body","specversion":"1.0"}', 'sqs-1', defaults),
    ).toBe('attr');
  });

  it('reads a configured attribute name case-insensitively', () => {
    expect(
      resolveMessageId({ 'x-request-id': 'r' }, '{}', 'sqs-1', {
        ...defaults,
        messageIdAttribute: 'X-Request-Id',
      }),
    ).toBe('r');
  });

  it('reads a binary-mode CloudEvents id attribute', () => {
    expect(resolveMessageId({ 'ce-id': 'ce' }, 'x', undefined, defaults)).toBe('ce');
  });

  it('reads the chosen body field, then a structured CloudEvents id', () => {
    const body = JSON.stringify({ specversion: '1.0', id: 'cloud', data: { orderId: 42 } });
    expect(resolveMessageId({}, body, 'sqs-1', { ...defaults, messageIdBodyField: 'data.orderId' })).toBe(
      '42',
    );
    expect(resolveMessageId({}, body, 'sqs-1', { ...defaults, messageIdBodyField: 'data.missing' })).toBe(
      'cloud',
    );
  });

  it('does not take a plain JSON id as a CloudEvents id', () => {
    expect(resolveMessageId({}, '{"id":"plain"}', 'sqs-1', defaults)).toBeUndefined();
  });

  it('falls back to the SQS MessageId only when asked', () => {
    expect(resolveMessageId({}, 'not json', 'sqs-1', defaults)).toBeUndefined();
    expect(resolveMessageId({}, 'not json', 'sqs-1', { ...defaults, useSqsMessageIdAsId: true })).toBe(
      'sqs-1',
    );
  });
});
