// @platformatic/kafka's errors in the shape the package reads from kafkajs' ones: a Kafka error code as `type`
// (MESSAGE_TOO_LARGE, REBALANCE_IN_PROGRESS …) and `retriable`.

interface PlatformaticErrorFields {
  readonly apiId?: unknown;
  readonly canRetry?: unknown;
  readonly cause?: unknown;
  readonly errors?: unknown;
}

/** The first Kafka error code (`apiId`) in the error, its causes and its grouped errors. */
function kafkaCode(error: unknown): { type: string; retriable: boolean } | undefined {
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0 && seen.size < 32) {
    const e = queue.shift();
    if (typeof e !== 'object' || e === null || seen.has(e)) continue;
    seen.add(e);
    const { apiId, canRetry, cause, errors } = e as PlatformaticErrorFields;
    if (typeof apiId === 'string') return { type: apiId, retriable: canRetry === true };
    queue.push(cause, ...(Array.isArray(errors) ? (errors as unknown[]) : []));
  }
  return undefined;
}

/**
 * Rethrows `error` as an Error carrying the Kafka error code it holds as `type` (with `retriable`), the
 * original as `cause`; an error without a Kafka code is rethrown as it is.
 */
export function kafkajsShaped(error: unknown): Error {
  const code = kafkaCode(error);
  if (code === undefined) return error instanceof Error ? error : new Error(String(error));
  const message = error instanceof Error ? error.message : String(error);
  return Object.assign(new Error(`${code.type}: ${message}`, { cause: error }), {
    name: 'PlatformaticKafkaError',
    type: code.type,
    retriable: code.retriable,
  });
}
