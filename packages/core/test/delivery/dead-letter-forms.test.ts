// The dead-letter forms every transport falls back through when a copy is too large for its broker (hardening
// issue, item 3): each smaller than the last, each read back with its id, consumer and reason, each saying what
// it dropped; and the loop that tries them stops at the first sent form or at an outage, never retrying one.

import { describe, expect, it } from 'vitest';
import {
  clipMessageId,
  DEAD_LETTER_FORMS,
  deadLetterForms,
  HEADERS,
  MINIMAL_ID_LENGTH,
  parseDeadLetterHeaders,
  sendInFittingForm,
} from '../../src/index.js';
import type { DeadLetterRecord, FormAttempt } from '../../src/index.js';

function record(id: string | undefined): DeadLetterRecord {
  return {
    originalId: id,
    consumer: 'orders',
    reason: 'permanent-error',
    attempts: 3,
    error: {
      name: 'PermanentError',
      message: 'm'.repeat(2_000),
      code: 'PERMANENT',
      stack: 's'.repeat(3_000),
    },
    firstFailureAt: new Date('2026-01-01T00:00:00Z'),
    lastFailureAt: new Date('2026-01-01T00:01:00Z'),
    deadLetteredAt: new Date('2026-01-01T00:02:00Z'),
    source: { transport: 'rabbitmq', destination: 'orders', exchange: 'ex', routingKey: 'rk' },
  };
}

const bytes = (headers: Readonly<Record<string, string>>): number =>
  Object.entries(headers).reduce((n, [k, v]) => n + k.length + Buffer.byteLength(v), 0);

describe('deadLetterForms', () => {
  it('gives full, compact and minimal in that order, each smaller, each read back with id, consumer, reason and attempts', () => {
    const forms = deadLetterForms(record('order-1'));
    expect(forms.map((f) => f.form)).toEqual([...DEAD_LETTER_FORMS]);
    const sizes = forms.map((f) => bytes(f.headers));
    expect(sizes[0]).toBeGreaterThan(sizes[1]!);
    expect(sizes[1]).toBeGreaterThan(sizes[2]!);
    for (const f of forms) {
      expect(parseDeadLetterHeaders(f.headers), f.form).toMatchObject({
        originalId: 'order-1',
        consumer: 'orders',
        reason: 'permanent-error',
        attempts: 3,
        source: { transport: 'rabbitmq', exchange: 'ex', routingKey: 'rk' },
      });
    }
  });

  it('says in x-inboxkit-dropped what each smaller form lacks, and keeps the original headers and trace until minimal', () => {
    const [full, compact, minimal] = deadLetterForms(record('order-1'));
    expect(full!.headers[HEADERS.dropped]).toBeUndefined();
    expect(full!.headers[HEADERS.errorStack]).toHaveLength(3_000);
    expect(compact!.headers[HEADERS.dropped]).toBe('error-stack,error-message-tail');
    expect(compact!.headers[HEADERS.errorStack]).toBeUndefined();
    expect(compact!.headers[HEADERS.errorMessage]!.length).toBeLessThanOrEqual(500);
    expect([compact!.originalHeaders, compact!.trace]).toEqual([true, true]);
    expect(minimal!.headers[HEADERS.dropped]).toBe(
      'original-headers,trace,error-stack,error-message,error-code',
    );
    expect([minimal!.originalHeaders, minimal!.trace]).toEqual([false, false]);
    expect(minimal!.headers[HEADERS.errorName]).toBe('PermanentError');
    // The id travels once in the minimal form.
    expect(minimal!.headers[HEADERS.originalId]).toBeUndefined();
    expect(minimal!.headers[HEADERS.messageId]).toBe('order-1');
  });

  it('clips a 40 KB id in the minimal form only, to at most 4,000 characters, keeping long ids distinct', () => {
    const long = `order-${'x'.repeat(40_000)}`;
    const forms = deadLetterForms(record(long));
    expect(forms[1]!.headers[HEADERS.messageId]).toBe(long);
    const clipped = forms[2]!.headers[HEADERS.messageId]!;
    expect(clipped.length).toBe(MINIMAL_ID_LENGTH);
    expect(clipped.startsWith('order-xxx')).toBe(true);
    expect(forms[2]!.dropped).toContain('message-id-clipped');
    expect(bytes(forms[2]!.headers)).toBeLessThan(6_000);
    expect(clipMessageId(`${long}y`)).not.toBe(clipped);
    expect(clipMessageId(long)).toBe(clipped);
    expect(clipMessageId('short')).toBe('short');
  });

  it('has nothing to drop from a compact form of a dead letter without an error', () => {
    const plain = { ...record(undefined), error: undefined };
    const [, compact, minimal] = deadLetterForms(plain);
    expect(compact!.headers[HEADERS.dropped]).toBeUndefined();
    expect(minimal!.headers[HEADERS.dropped]).toBe('original-headers,trace');
  });
});

describe('sendInFittingForm', () => {
  const tried: string[] = [];
  const script =
    (answers: Record<string, FormAttempt['status']>) =>
    async (form: string): Promise<FormAttempt> => {
      tried.push(form);
      const status = answers[form]!;
      return status === 'sent' ? { status } : { status, error: new Error(`${form} ${status}`) };
    };

  it('moves past the forms refused as too large to the first one sent', async () => {
    tried.length = 0;
    const result = await sendInFittingForm(
      DEAD_LETTER_FORMS,
      script({ full: 'too-large', compact: 'too-large', minimal: 'sent' }),
    );
    expect(result).toEqual({ status: 'sent', form: 'minimal' });
    expect(tried).toEqual(['full', 'compact', 'minimal']);
  });

  it('stops at an outage without trying a smaller form', async () => {
    tried.length = 0;
    const result = await sendInFittingForm(
      DEAD_LETTER_FORMS,
      script({ full: 'too-large', compact: 'failed', minimal: 'sent' }),
    );
    expect(result).toMatchObject({ status: 'failed', form: 'compact' });
    expect(tried).toEqual(['full', 'compact']);
  });

  it('reports too-large with the last refusal when every form is too large, and a rejecting send as failed', async () => {
    const all = await sendInFittingForm(
      DEAD_LETTER_FORMS,
      script({ full: 'too-large', compact: 'too-large', minimal: 'too-large' }),
    );
    expect(all.status).toBe('too-large');
    expect((all as { error: Error }).error.message).toBe('minimal too-large');
    const rejected = await sendInFittingForm(['full'], () => Promise.reject(new Error('down')));
    expect(rejected).toMatchObject({ status: 'failed', form: 'full' });
  });
});
