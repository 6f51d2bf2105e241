// The dead-letter copy keeps the original headers as bytes but never stale inboxkit headers.
import { describe, expect, it } from 'vitest';

import { deadLetterRecordHeaders } from '../src/dead-letter-producer.js';

describe('deadLetterRecordHeaders', () => {
  it('keeps original headers, drops earlier x-inboxkit-* ones and lets the fresh headers win', () => {
    const original = {
      traceparent: Buffer.from('00-abc'),
      'Message-Id': 'old',
      'x-inboxkit-error-code': 'E_OLD',
      'X-Inboxkit-Replay-Id': 'r-1',
      constructor: 'kept',
    };
    const fresh = { 'message-id': 'm-1', 'x-inboxkit-reason': 'max-attempts' };
    expect(deadLetterRecordHeaders(original, fresh)).toEqual({
      traceparent: Buffer.from('00-abc'),
      constructor: 'kept',
      'message-id': 'm-1',
      'x-inboxkit-reason': 'max-attempts',
    });
  });
});
