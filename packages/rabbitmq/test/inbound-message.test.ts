// How a delivery becomes core's InboundMessage: id precedence, header normalisation, timestamps and counts.

import { HEADERS } from '@inboxkit/core';
import { describe, expect, it } from 'vitest';
import type { AmqpMessage } from '../src/index.js';
import { toInboundMessage } from '../src/inbound-message.js';

function delivery(properties: AmqpMessage['properties'], body = '{}', redelivered = false): AmqpMessage {
  return {
    content: Buffer.from(body),
    fields: { deliveryTag: 7, redelivered, exchange: 'orders-x', routingKey: 'created' },
    properties,
  };
}

describe('toInboundMessage', () => {
  it('takes the id from the messageId property, then message-id, then ce-id / ce_id, then the option', () => {
    const id = (p: AmqpMessage['properties'], fn?: () => string | undefined) =>
      toInboundMessage(delivery(p), 'q', { messageId: fn }).id;
    expect(id({ messageId: 'p', headers: { 'message-id': 'h', 'ce-id': 'c' } })).toBe('p');
    expect(id({ messageId: '', headers: { 'MESSAGE-ID': 'h', 'ce-id': 'c' } })).toBe('h');
    expect(id({ headers: { 'ce-id': 'c' } })).toBe('c');
    expect(id({ headers: { ce_id: 'k' } })).toBe('k');
    expect(id({ headers: {} }, () => 'fn')).toBe('fn');
    expect(
      id({}, () => {
        throw new Error('bug');
      }),
    ).toBeUndefined();
    expect(id({})).toBeUndefined();
    expect(toInboundMessage(delivery({}, 'abc'), 'q', { contentIdFallback: true }).id).toBe(
      'sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });

  it('lower-cases header names and turns values into strings', () => {
    const m = toInboundMessage(
      delivery({
        headers: {
          'X-Tenant': 't1',
          'x-n': 3,
          'x-flag': true,
          'x-buf': Buffer.from('bytes'),
          'x-ts': { '!': 'timestamp', value: 1_700_000_000 },
          'x-table': { a: 1 },
          'x-null': null,
        },
      }),
      'q',
      {},
    );
    expect(m.headers).toEqual({
      'x-tenant': 't1',
      'x-n': '3',
      'x-flag': 'true',
      'x-buf': 'bytes',
      'x-ts': '2023-11-14T22:13:20.000Z',
      'x-table': '{"a":1}',
    });
  });

  it('counts deliveries from the carried attempts only (x-delivery-count counts returns, not attempts), and reads the timestamp', () => {
    expect(toInboundMessage(delivery({}), 'q', {}).deliveryCount).toBe(1);
    expect(toInboundMessage(delivery({ headers: { 'x-delivery-count': 2 } }), 'q', {}).deliveryCount).toBe(1);
    expect(
      toInboundMessage(delivery({ headers: { [HEADERS.attempt]: '2', 'x-delivery-count': 1 } }), 'q', {})
        .deliveryCount,
    ).toBe(3);
    expect(toInboundMessage(delivery({ timestamp: 1_700_000_000 }), 'q', {}).timestamp?.toISOString()).toBe(
      '2023-11-14T22:13:20.000Z',
    );
    expect(
      toInboundMessage(delivery({ timestamp: 1_700_000_000_123 }), 'q', {}).timestamp?.toISOString(),
    ).toBe('2023-11-14T22:13:20.123Z');
    expect(
      toInboundMessage(
        delivery({ headers: { 'ce-time': '2024-01-01T00:00:00Z' } }),
        'q',
        {},
      ).timestamp?.getTime(),
    ).toBe(Date.parse('2024-01-01T00:00:00Z'));
  });

  it('fills the source, keeping the original route carried by a delay-queue copy, and the replay marker', () => {
    expect(toInboundMessage(delivery({}), 'orders', {}).source).toEqual({
      transport: 'rabbitmq',
      destination: 'orders',
      exchange: 'orders-x',
      routingKey: 'created',
      brokerMessageId: '7',
    });
    const copy = toInboundMessage(
      delivery({
        headers: {
          [HEADERS.sourceExchange]: 'orig-x',
          [HEADERS.sourceRoutingKey]: 'orig-rk',
          [HEADERS.replayId]: 'r1',
        },
      }),
      'orders',
      {},
    );
    expect(copy.source).toMatchObject({ exchange: 'orig-x', routingKey: 'orig-rk' });
    expect(copy.replay).toMatchObject({ replayId: 'r1' });
  });
});
