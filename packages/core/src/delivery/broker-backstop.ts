// The broker's own delivery limit (SQS maxReceiveCount, a RabbitMQ quorum queue's x-delivery-limit) is a
// backstop for crash loops the inbox cannot count: it must sit above maxAttempts, so inboxkit dead-letters a
// message with its record before the broker moves it aside without one. The formula and its check, once.

/** How a transport places its broker's limit above `maxAttempts`. */
export interface BackstopPolicy {
  /** Deliveries allowed beyond `maxAttempts`, or a function of it. */
  readonly headroom: number | ((maxAttempts: number) => number);
  /** The least limit whatever `maxAttempts` is. Default is 0 (none). */
  readonly floor?: number;
}

/**
 * The broker's delivery limit for `maxAttempts`: `max(floor, maxAttempts + headroom)`, always above
 * `maxAttempts` when the headroom is positive.
 *
 * @example
 * backstopLimit(5, { headroom: (n) => Math.max(5, n) });  // SQS maxReceiveCount: 10
 * backstopLimit(5, { headroom: 5, floor: 20 });           // RabbitMQ x-delivery-limit: 20
 */
export function backstopLimit(maxAttempts: number, policy: BackstopPolicy): number {
  const headroom = typeof policy.headroom === 'function' ? policy.headroom(maxAttempts) : policy.headroom;
  return Math.max(policy.floor ?? 0, maxAttempts + headroom);
}

/**
 * True when `limit` is a backstop for `maxAttempts`: an integer above it. Below or equal, the broker would
 * dead-letter messages without inboxkit's record while the inbox would still retry them: a transport rejects
 * such a setting with a `ConfigurationError` naming its own option.
 *
 * @example
 * if (!isBackstop(maxReceiveCount, maxAttempts)) throw new ConfigurationError('raise maxReceiveCount above maxAttempts');
 */
export function isBackstop(limit: number, maxAttempts: number): boolean {
  return Number.isInteger(limit) && limit > maxAttempts;
}
