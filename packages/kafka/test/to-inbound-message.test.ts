// How a kafkajs record becomes core's InboundMessage: headers, the id resolution order, coordinates.
import { HEADERS } from '@inboxkit/core';
import type { Logger } from '@inboxkit/core';
import { describe, expect, it } from 'vitest';

import type { KafkaMessageLike } from '../src/kafka-client-types.js';
import { decodeHeaders, toInboundMessage } from '../src/to-inbound-message.js';
import type { KafkaRecord, MessageIdResolution } from '../src/to-inbound-message.js';

const warnings: unknown[] = [];
const logger: Logger = { debug() {}, info() {}, warn: (obj) => warnings.push(obj), error() {} };

function record(headers: KafkaMessageLike['headers'], value: string | null = '{"a":1}'): KafkaMessageLike {
  return {
    key: Buffer.from('k1'),
    value: value === null ? null : Buffer.from(value),
    timestamp: '1700000000000',
    offset: '42',
    headers,
  };
}

function resolution(partial: Partial<MessageIdResolution> = {}): MessageIdResolution {
  return { messageId: undefined, useCoordinatesAsId: false, logger, ...partial };
}

describe('decodeHeaders', () => {
  it('lower-cases names, decodes buffers as UTF-8 and keeps the last value of a repeated header', () => {
    expect(
      decodeHeaders({ 'Message-ID': Buffer.from('m-1'), Trace: ['a', Buffer.from('b')], empty: undefined }),
    ).toEqual({
      'message-id': 'm-1',
      trace: 'b',
    });
  });
});

describe('toInboundMessage', () => {
  it('takes the message-id header first, with source coordinates, timestamp and raw body', () => {
    const message = toInboundMessage(
      'payments',
      3,
      record({ 'message-id': 'pay-1', ce_id: 'ce-1' }),
      resolution(),
    );
    expect(message.id).toBe('pay-1');
    expect(message.source).toEqual({
      transport: 'kafka',
      destination: 'payments',
      partition: 3,
      offset: '42',
      brokerMessageId: 'payments:3:42',
    });
    expect(message.timestamp).toEqual(new Date(1_700_000_000_000));
    expect(Buffer.from(message.body as Uint8Array).toString()).toBe('{"a":1}');
    expect(message.replay).toBeUndefined();
  });

  it('falls back to the CloudEvents ce_id header, then the messageId function', () => {
    expect(toInboundMessage('t', 0, record({ ce_id: 'ce-1' }), resolution()).id).toBe('ce-1');
    const fromKey = (r: KafkaRecord): string | undefined => `key-${r.key?.toString() ?? ''}`;
    expect(toInboundMessage('t', 0, record({}), resolution({ messageId: fromKey })).id).toBe('key-k1');
    expect(
      toInboundMessage('t', 0, record({ 'message-id': '' }), resolution({ messageId: fromKey })).id,
    ).toBe('key-k1');
  });

  it('uses the coordinates only when opted in, and has no id otherwise', () => {
    expect(toInboundMessage('t', 2, record({}), resolution()).id).toBeUndefined();
    expect(toInboundMessage('t', 2, record({}), resolution({ useCoordinatesAsId: true })).id).toBe('t:2:42');
    expect(
      toInboundMessage(
        't',
        2,
        record({}),
        resolution({ messageId: () => undefined, useCoordinatesAsId: true }),
      ).id,
    ).toBe('t:2:42');
  });

  it('treats a throwing messageId function as no id, and logs it', () => {
    const before = warnings.length;
    const id = toInboundMessage(
      't',
      0,
      record({}),
      resolution({
        messageId: () => {
          throw new Error('bad payload');
        },
      }),
    ).id;
    expect(id).toBeUndefined();
    expect(warnings.length).toBe(before + 1);
  });

  it('reads the replay marker and passes a tombstone as a null body', () => {
    const message = toInboundMessage(
      't',
      0,
      record({ 'message-id': 'm', [HEADERS.replayId]: 'r-1', [HEADERS.replayBy]: 'ops' }, null),
      resolution(),
    );
    expect(message.replay).toMatchObject({ replayId: 'r-1', requestedBy: 'ops' });
    expect(message.body).toBeNull();
  });
});
