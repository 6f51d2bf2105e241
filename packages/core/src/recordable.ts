// Values made safe to record. What a failure writes (error text, headers, a producer's timestamp) comes from
// users and senders; a store or broker that refuses it would turn a poison message into an endless retry
// (Postgres json refuses a lone UTF-16 surrogate and NUL, timestamptz refuses years outside 1–9999, text refuses
// NUL). Core hands every store and transport values that pass, so no failure is unrecordable for its content.

/** A lone high surrogate, a lone low surrogate, or NUL. */
// eslint-disable-next-line no-control-regex -- NUL is one of the characters this looks for
const UNRECORDABLE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]|\u0000/g;

/** U+FFFD, the replacement character Unicode defines for a character that cannot be represented. */
export const REPLACEMENT_CHARACTER = '\uFFFD';

/**
 * `text` as well-formed Unicode without NUL: every lone surrogate and every NUL becomes U+FFFD, everything else
 * is kept. Postgres json/jsonb and text, UTF-8 encoders and broker headers all accept the result.
 *
 * @example
 * recordableText('bad x\ud800y') // 'bad x\ufffdy'
 */
export function recordableText(text: string): string {
  return text.replace(UNRECORDABLE, REPLACEMENT_CHARACTER);
}

/**
 * `text` cut to at most `max` UTF-16 units, ending in `…` when cut, never between the two halves of a
 * surrogate pair (which would leave a lone surrogate behind).
 */
export function clipText(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = Math.max(0, max - 1);
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}

/** The earliest and latest instants every store records (Postgres timestamptz parses years 1 to 9999). */
const EARLIEST_MS = Date.parse('0001-01-01T00:00:00.000Z');
const LATEST_MS = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * A valid date clamped into the recordable range (year 1 to 9999), `undefined` for anything else. A producer
 * timestamp of year −20,000 is then recorded as 0001-01-01 (still older than any dedupe window) and one of
 * year 20,000 as 9999-12-31 (never late), instead of making every write of its row fail.
 */
export function recordableDate(value: unknown): Date | undefined {
  if (!(value instanceof Date)) return undefined;
  const ms = value.getTime();
  if (Number.isNaN(ms)) return undefined;
  if (ms < EARLIEST_MS) return new Date(EARLIEST_MS);
  if (ms > LATEST_MS) return new Date(LATEST_MS);
  return value;
}
