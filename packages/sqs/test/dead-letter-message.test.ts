// A dead letter's facts survive SQS's 10-attribute limit: core's parser reads them back from what the DLQ
// reader returns.
import { describe, expect, it } from 'vitest';
import { HEADERS, parseDeadLetterHeaders } from '@inboxkit/core';
import type { DeadLetterOutcome, InboundMessage } from '@inboxkit/core';
import { deadLetterMessage } from '../src/dead-letter-message.js';
import {
  MAX_MESSAGE_ATTRIBUTES,
  SQS_ATTRIBUTES,
  decodeMessageAttributes,
  expandDeadLetterHeaders,
} from '../src/message-attributes.js';

const originalHeaders: Record<string, string> = { 'message-id': 'order-1' };
for (let i = 0; i < 9; i++) originalHeaders[`trace-${i}`] = `t${i}`;
const message: InboundMessage = {
  id: 'order-1',
  body: '{"total":3}',
  headers: originalHeaders,
  source: { transport: 'sqs', destination: 'http://sqs/queue/orders.fifo', brokerMessageId: 'm-1' },
};
const outcome: DeadLetterOutcome = {
  status: 'dead-letter',
  messageId: 'order-1',
  reason: 'max-attempts',
  attempts: 5,
  error: { name: 'Error', message: 'boom', stack: 'Error: boom\n  at x' },
  firstFailureAt: new Date('2026-01-01T00:00:00Z'),
  lastFailureAt: new Date('2026-01-01T00:01:00Z'),
};

describe('deadLetterMessage', () => {
  const input = deadLetterMessage(
    'http://sqs/queue/orders-dlq.fifo',
    'orders',
    message,
    {
      MessageId: 'm-1',
      Body: '{"total":3}',
      Attributes: { MessageGroupId: 'customer-7' },
    },
    outcome,
  );

  it('keeps the body, fits in 10 attributes and names id, reason and consumer directly', () => {
    expect(input.MessageBody).toBe('{"total":3}');
    const attributes = input.MessageAttributes ?? {};
    expect(Object.keys(attributes).length).toBeLessThanOrEqual(MAX_MESSAGE_ATTRIBUTES);
    expect(attributes[HEADERS.messageId]?.StringValue).toBe('order-1');
    expect(attributes[HEADERS.reason]?.StringValue).toBe('max-attempts');
    expect(attributes[HEADERS.consumer]?.StringValue).toBe('orders');
    expect(attributes[SQS_ATTRIBUTES.deadLetter]).toBeDefined();
  });

  it('is read back by parseDeadLetterHeaders, original headers included', () => {
    const headers = expandDeadLetterHeaders(decodeMessageAttributes(input.MessageAttributes));
    const record = parseDeadLetterHeaders(headers);
    expect(record).toMatchObject({
      originalId: 'order-1',
      consumer: 'orders',
      reason: 'max-attempts',
      attempts: 5,
      error: { name: 'Error', message: 'boom' },
      firstFailureAt: outcome.firstFailureAt,
      source: { transport: 'sqs', destination: 'http://sqs/queue/orders.fifo' },
    });
    for (let i = 0; i < 9; i++) expect(headers[`trace-${i}`]).toBe(`t${i}`);
    expect(headers[SQS_ATTRIBUTES.sourceMessageGroupId]).toBe('customer-7');
  });

  it('keeps the FIFO group and deduplicates a resend of the same dead letter only', () => {
    expect(input.MessageGroupId).toBe('customer-7');
    const again = deadLetterMessage(
      'http://sqs/queue/orders-dlq.fifo',
      'orders',
      message,
      { MessageId: 'm-2', Body: 'x' },
      outcome,
    );
    expect(again.MessageDeduplicationId).toBe(input.MessageDeduplicationId);
    const replayed = deadLetterMessage(
      'http://sqs/queue/orders-dlq.fifo',
      'orders',
      { ...message, replay: { replayId: 'r-1' } },
      { MessageId: 'm-3', Body: 'x' },
      outcome,
    );
    expect(replayed.MessageDeduplicationId).not.toBe(input.MessageDeduplicationId);
  });
});
