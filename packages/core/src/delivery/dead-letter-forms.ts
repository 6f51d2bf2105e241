// The forms a dead letter may travel in, written once for every transport. A broker (or its client) refuses a
// copy that is too large — amqplib's 64 KiB header table, Kafka's max.message.bytes, SQS's 256 KiB — and it
// refuses the same copy on every attempt: holding the source message as if the broker were down would loop
// forever. So a dead letter is offered largest form first, and a form refused as too large gives way to the
// next, smaller one; only a failure that may pass (the broker unreachable) leaves the source message in place.

import { createHash } from 'node:crypto';
import { deadLetterHeaders, HEADERS } from '../dead-letter-record.js';
import type { DeadLetterRecord } from '../dead-letter-record.js';
import { clipText } from '../recordable.js';

/**
 * How much of a dead letter travels, largest first:
 * - `full`: the original headers, every dead-letter header, the delivery's trace;
 * - `compact`: as `full` without the error's stack, its message clipped to 500 characters;
 * - `minimal`: no original headers, no trace, no error text or code: the id once (in `message-id`, clipped to
 *   4,000 characters when longer), consumer, reason, attempts, times, source and the error's name.
 * The smaller forms carry `x-inboxkit-dropped` naming what they lack. The body is the original's in every form.
 */
export type DeadLetterForm = 'full' | 'compact' | 'minimal';

/** The forms, largest first: the order a transport tries them in. */
export const DEAD_LETTER_FORMS: readonly DeadLetterForm[] = Object.freeze(['full', 'compact', 'minimal']);

/** One form of a dead letter, as a transport builds its copy from it. */
export interface DeadLetterFormSpec {
  readonly form: DeadLetterForm;
  /** inboxkit's headers for this form (`deadLetterHeaders` cut down, plus `x-inboxkit-dropped` when smaller). */
  readonly headers: Readonly<Record<string, string>>;
  /** Whether the original message's own headers travel with the copy. */
  readonly originalHeaders: boolean;
  /** Whether the copy continues the delivery's trace (`traceparent`). */
  readonly trace: boolean;
  /** What this form lacks compared with `full` (the value of `x-inboxkit-dropped`); empty for `full`. */
  readonly dropped: readonly string[];
}

/** A compact dead letter keeps this much of the error message. */
export const COMPACT_ERROR_MESSAGE_LENGTH = 500;

/** A minimal dead letter clips a longer id to this many characters (a SHA-256 of the whole id included). */
export const MINIMAL_ID_LENGTH = 4_000;

/**
 * `id` when at most `MINIMAL_ID_LENGTH` characters, else its head and the SHA-256 of the whole id, so two long
 * ids that share a head stay distinct and the same id always clips the same way.
 */
export function clipMessageId(id: string): string {
  if (id.length <= MINIMAL_ID_LENGTH) return id;
  const digest = createHash('sha256').update(id, 'utf8').digest('hex');
  const suffix = `…sha256:${digest}`;
  return `${clipText(id, MINIMAL_ID_LENGTH - suffix.length + 1).slice(0, -1)}${suffix}`;
}

/** The headers of the minimal form: only what a DLQ reader cannot do without. */
const MINIMAL_DROPS = [
  HEADERS.errorStack,
  HEADERS.errorMessage,
  HEADERS.errorCode,
  HEADERS.originalId,
] as const;

/**
 * The forms of `record`'s dead letter, largest first (`DEAD_LETTER_FORMS`). Each reads back with
 * `parseDeadLetterHeaders` with the same id (unless clipped), consumer, reason and attempts.
 *
 * @example
 * for (const spec of deadLetterForms(deadLetterRecord('orders', message, outcome))) {
 *   const headers = spec.originalHeaders ? { ...message.headers, ...spec.headers } : spec.headers;
 *   // build the broker's copy from `headers`, try it, move on when the broker says it is too large
 * }
 */
export function deadLetterForms(record: DeadLetterRecord): readonly DeadLetterFormSpec[] {
  const full = deadLetterHeaders(record);

  const compact = { ...full };
  const compactDropped: string[] = [];
  if (compact[HEADERS.errorStack] !== undefined) {
    delete compact[HEADERS.errorStack];
    compactDropped.push('error-stack');
  }
  const errorMessage = compact[HEADERS.errorMessage];
  if (errorMessage !== undefined && errorMessage.length > COMPACT_ERROR_MESSAGE_LENGTH) {
    compact[HEADERS.errorMessage] = clipText(errorMessage, COMPACT_ERROR_MESSAGE_LENGTH);
    compactDropped.push('error-message-tail');
  }
  if (compactDropped.length > 0) compact[HEADERS.dropped] = compactDropped.join(',');

  const minimal = { ...full };
  const minimalDropped: string[] = ['original-headers', 'trace'];
  for (const name of MINIMAL_DROPS) {
    if (minimal[name] === undefined) continue;
    delete minimal[name];
    if (name !== HEADERS.originalId) minimalDropped.push(name.slice('x-inboxkit-'.length));
  }
  const id = minimal[HEADERS.messageId];
  if (id !== undefined && clipMessageId(id) !== id) {
    minimal[HEADERS.messageId] = clipMessageId(id);
    minimalDropped.push('message-id-clipped');
  }
  minimal[HEADERS.dropped] = minimalDropped.join(',');

  return [
    { form: 'full', headers: full, originalHeaders: true, trace: true, dropped: [] },
    { form: 'compact', headers: compact, originalHeaders: true, trace: true, dropped: compactDropped },
    { form: 'minimal', headers: minimal, originalHeaders: false, trace: false, dropped: minimalDropped },
  ];
}

/** What a transport reports for one form it tried. */
export type FormAttempt =
  /** The broker took (and confirmed) the copy. */
  | { readonly status: 'sent' }
  /** The copy can never be taken as it is (too large, not encodable): the next form is tried. */
  | { readonly status: 'too-large'; readonly error: unknown }
  /** Anything else (broker unreachable, not confirmed): an outage, no smaller form is tried. */
  | { readonly status: 'failed'; readonly error: unknown };

/** The result of `sendInFittingForm`. */
export type FormsResult<F> =
  | { readonly status: 'sent'; readonly form: F }
  /** Every form was refused as too large: the last refusal. */
  | { readonly status: 'too-large'; readonly error: unknown }
  | { readonly status: 'failed'; readonly error: unknown; readonly form: F };

/**
 * Tries `forms` in order with `send` until one is sent: `too-large` moves to the next form, `failed` stops (an
 * outage: the caller leaves the source message to be redelivered). A `send` that rejects counts as `failed`.
 *
 * @example
 * const result = await sendInFittingForm(deadLetterForms(record), async (spec) => {
 *   try { await produce(copyOf(spec)); return { status: 'sent' }; }
 *   catch (error) { return { status: isTooLarge(error) ? 'too-large' : 'failed', error }; }
 * });
 */
export async function sendInFittingForm<F>(
  forms: readonly F[],
  send: (form: F, index: number) => Promise<FormAttempt>,
): Promise<FormsResult<F>> {
  let lastError: unknown = new Error('no dead-letter form to send');
  for (const [index, form] of forms.entries()) {
    let attempt: FormAttempt;
    try {
      attempt = await send(form, index);
    } catch (error) {
      attempt = { status: 'failed', error };
    }
    if (attempt.status === 'sent') return { status: 'sent', form };
    if (attempt.status === 'failed') return { status: 'failed', error: attempt.error, form };
    lastError = attempt.error;
  }
  return { status: 'too-large', error: lastError };
}
