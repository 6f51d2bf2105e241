// Headers survive the trip through SQS message attributes, within SQS's 10-attribute limit.
import { describe, expect, it } from 'vitest';
import {
  MAX_MESSAGE_ATTRIBUTES,
  SQS_ATTRIBUTES,
  decodeMessageAttributes,
  encodeMessageAttributes,
} from '../src/message-attributes.js';

describe('message attributes', () => {
  it('gives each header its own attribute when they fit', () => {
    const attributes = encodeMessageAttributes({ 'message-id': 'a', 'content-type': 'application/json' });
    expect(attributes).toEqual({
      'message-id': { DataType: 'String', StringValue: 'a' },
      'content-type': { DataType: 'String', StringValue: 'application/json' },
    });
    expect(decodeMessageAttributes(attributes)).toEqual({
      'message-id': 'a',
      'content-type': 'application/json',
    });
  });

  it('packs what does not fit into one JSON attribute and unpacks it on receipt', () => {
    const headers: Record<string, string> = { 'message-id': 'id-1' };
    for (let i = 0; i < 14; i++) headers[`h${i}`] = `v${i}`;
    headers['bad name!'] = 'x';
    headers.empty = '';
    const attributes = encodeMessageAttributes(headers, ['h13']);
    expect(Object.keys(attributes)).toHaveLength(MAX_MESSAGE_ATTRIBUTES);
    expect(attributes['message-id']?.StringValue).toBe('id-1');
    expect(attributes.h13?.StringValue).toBe('v13');
    expect(attributes[SQS_ATTRIBUTES.packedHeaders]).toBeDefined();
    expect(decodeMessageAttributes(attributes)).toEqual(headers);
  });

  it('lower-cases names and reads number and binary attributes as strings', () => {
    expect(
      decodeMessageAttributes({
        'Message-Id': { DataType: 'String', StringValue: 'X' },
        Count: { DataType: 'Number', StringValue: '3' },
        Blob: { DataType: 'Binary', BinaryValue: new Uint8Array([1, 2]) },
      }),
    ).toEqual({ 'message-id': 'X', count: '3', blob: 'AQI=' });
  });
});
