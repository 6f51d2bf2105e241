// The intent's own time: when the producer says the thing happened, the same on every resend of one intent —
// unlike the broker timestamp, which a producer that re-publishes an intent as a new record (an outbox resent
// after a crash, a CDC re-snapshot) stamps anew. A store partitioned by day takes the day from it
// (`ClaimRequest.intentTime`); nothing else does (the late rule keeps the message timestamp).

import { SchemaValidationError } from './errors.js';
import type { DecodedMessage } from './message.js';
import { recordableDate } from './recordable.js';

/**
 * The headers that carry the CloudEvents `time` attribute in binary mode, lower-cased: Kafka (`ce_time`), HTTP
 * and this project's AMQP/SQS convention (`ce-time`), and the AMQP binding's `cloudEvents:time` (and its older
 * `cloudEvents_time`).
 */
export const CLOUDEVENTS_TIME_HEADERS = ['ce_time', 'ce-time', 'cloudevents:time', 'cloudevents_time'] as const;

/** RFC 3339, as CloudEvents requires of `time`: a date, a time, optional fractions, and `Z` or an offset. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * The CloudEvents `time` of a message in binary mode, or `undefined` when it has none or one that is not an
 * RFC 3339 instant. An unreadable `time` is not the consumer's concern (it did not ask for the header): the day
 * then comes from the message timestamp, and the store's cross-day check still finds the intent's other days.
 *
 * @example
 * cloudEventsTime({ ce_time: '2026-12-03T23:59:59Z' }) // 2026-12-03T23:59:59.000Z
 */
export function cloudEventsTime(headers: Readonly<Record<string, string>>): Date | undefined {
  for (const name of CLOUDEVENTS_TIME_HEADERS) {
    const value = headers[name];
    if (value === undefined) continue;
    const text = value.trim();
    return RFC3339.test(text) ? recordableDate(new Date(text)) : undefined;
  }
  return undefined;
}

/**
 * The intent's time of a decoded message: `dayOf(message)` when the consumer gives one and it answers a date,
 * else the CloudEvents `time` header, else `undefined` (the store then takes the message timestamp). A `dayOf`
 * that throws or answers anything but a valid `Date` or `undefined` throws a `SchemaValidationError` saying
 * what it answered: the consumer dead-letters the message (`schema-invalid`), as it would a payload that lacks
 * a field its schema requires.
 */
export function intentTimeOf<P>(message: DecodedMessage<P>, dayOf: ((message: DecodedMessage<P>) => Date | undefined) | undefined): Date | undefined {
  if (dayOf !== undefined) {
    let value: unknown;
    try {
      value = dayOf(message);
    } catch (error) {
      throw new SchemaValidationError(`dayOf threw: ${error instanceof Error ? error.message : String(error)}`, [], { cause: error });
    }
    if (value !== undefined) {
      const date = recordableDate(value);
      if (date === undefined) {
        const shown = value instanceof Date ? 'an invalid Date' : typeof value === 'string' ? `the string ${JSON.stringify(value.slice(0, 100))}` : typeof value;
        throw new SchemaValidationError(`dayOf must answer a valid Date or undefined, got ${shown}`, []);
      }
      return date;
    }
  }
  return cloudEventsTime(message.headers);
}
