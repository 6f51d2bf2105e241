// AMQP 0-9-1 "short strings" — the messageId, contentType, correlationId, type and appId properties, exchange
// and routing-key names, header names — hold at most 255 bytes of UTF-8. amqplib refuses a longer one before it
// reaches the broker, so a copy that put a long id in `messageId` could never be published: the original would
// be requeued forever. Values that may be longer travel in headers (long strings) instead.

/** The most bytes an AMQP short string holds. */
export const MAX_SHORT_STRING_BYTES = 255;

/** True when `value` fits an AMQP short string. */
export function fitsShortString(value: string): boolean {
  return (
    value.length <= MAX_SHORT_STRING_BYTES / 3 || Buffer.byteLength(value, 'utf8') <= MAX_SHORT_STRING_BYTES
  );
}
