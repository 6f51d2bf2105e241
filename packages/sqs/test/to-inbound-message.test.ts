// How a received SQS message's timestamp is read: the producer's `x-inboxkit-timestamp` attribute (fixed once
// per message, the same on every resend) before the broker's SentTimestamp (stamped per send); an attribute
// that is not a valid time is ignored, never fatal.

import type { Message } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { toInboundMessage } from '../src/to-inbound-message.js';

const SENT = Date.UTC(2026, 11, 3, 0, 0, 1, 500);
const PRODUCED = Date.UTC(2026, 11, 2, 23, 59, 59, 250);

function received(timestampAttribute: string | undefined): Message {
  return {
    MessageId: 'sqs-1',
    Body: '{}',
    Attributes: { SentTimestamp: String(SENT) },
    MessageAttributes: {
      'message-id': { DataType: 'String', StringValue: 'm-1' },
      ...(timestampAttribute === undefined ? {} : { 'x-inboxkit-timestamp': { DataType: 'String', StringValue: timestampAttribute } }),
    },
  };
}

const options = {
  queueUrl: 'http://sqs/q',
  resolveMessageId: undefined,
  messageIdAttribute: 'message-id',
  messageIdBodyField: undefined,
  useSqsMessageIdAsId: false,
};

describe('toInboundMessage timestamp', () => {
  it('prefers the producer timestamp attribute over SentTimestamp', () => {
    expect(toInboundMessage(received(String(PRODUCED)), options).timestamp?.getTime()).toBe(PRODUCED);
  });

  it('falls back to SentTimestamp without the attribute', () => {
    expect(toInboundMessage(received(undefined), options).timestamp?.getTime()).toBe(SENT);
  });

  it.each(['yesterday', '2026-12-02T23:59:59Z', '0', '-5', '1.5', '1e12', '99999999999999999', ' 1764719999250'])(
    'ignores an attribute that is not a valid epoch-ms time (%j) and uses SentTimestamp',
    (value) => {
      expect(toInboundMessage(received(value), options).timestamp?.getTime()).toBe(SENT);
    },
  );
});
