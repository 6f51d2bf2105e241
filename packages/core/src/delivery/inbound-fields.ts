// Reading the broker fields a transport turns into an InboundMessage, written once: an id is a non-empty
// string, a count or a time stamp a positive integer; anything else counts as absent, never as an error.

/** The latest time a Date can hold, in epoch milliseconds. */
const MAX_DATE_MS = 8.64e15;

/**
 * `value` when it is a non-empty string, else `undefined`: how the transports read an id from a header, a
 * property or the user's `messageId` function (an empty id is no id).
 *
 * @example
 * const id = nonEmptyText(headers['message-id']) ?? nonEmptyText(headers['ce_id']);
 */
export function nonEmptyText(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * The positive integer written in `text` (`'3'`, `'1700000000000'`), else `undefined` (absent, empty, `0`,
 * negative, fractional or not a number).
 *
 * @example
 * const attempts = positiveIntegerText(headers['x-inboxkit-attempt']) ?? 0;
 */
export function positiveIntegerText(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}

/**
 * The producer's time written in `text`, epoch milliseconds (inboxkit's publishers write
 * `OutgoingMessage.timestamp` as the `x-inboxkit-timestamp` header or attribute: a time fixed by the producer,
 * the same on every resend), else `undefined` — absent, not a positive integer, or past what a Date holds — so
 * a malformed value is ignored, never fatal, and the transport falls back to its broker's own time.
 *
 * @example
 * const ms = producerTimestampMs(headers['x-inboxkit-timestamp']) ?? positiveIntegerText(attributes.SentTimestamp);
 */
export function producerTimestampMs(text: string | undefined): number | undefined {
  if (text === undefined || !/^[0-9]{1,16}$/.test(text)) return undefined;
  const ms = positiveIntegerText(text);
  return ms !== undefined && ms <= MAX_DATE_MS ? ms : undefined;
}
