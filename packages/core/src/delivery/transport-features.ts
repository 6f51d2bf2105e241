// What a broker guarantees, declared once by its transport: the conformance suite runs the checks that apply,
// and the delivery kit picks its policies from the declaration instead of branching on the broker's name.

/**
 * The capabilities of a transport's broker. A policy a broker cannot support is chosen by its declaration
 * here, never by a test of which broker it is.
 *
 * @example
 * const SQS_FEATURES: TransportFeatures = { ordering: 'none', nativeDelay: true, deliveryCount: false, redeliverSpendsCount: true };
 */
export interface TransportFeatures {
  /** `key`: order kept per partition key / message group; `none`: no ordering promise. */
  readonly ordering: 'key' | 'none';
  /** The broker itself holds a retried message for `delayMs` (RabbitMQ delay queue, SQS visibility). */
  readonly nativeDelay: boolean;
  /** The broker keeps a delivery count that the transport passes as `deliveryCount`. */
  readonly deliveryCount: boolean;
  /**
   * The transport's `redeliver` verb spends a delivery that the broker counts against a limit of its own, or
   * passes to core as `deliveryCount` (SQS: every receive raises `ApproximateReceiveCount` towards the redrive
   * policy's `maxReceiveCount`). A store outage is then ridden out in process (`DeliveryGuard`: the delivery is
   * kept and tried again here until the store answers or the consumer stops), so an outage spends no count and
   * dead-letters nothing. When false (Kafka seeks back; RabbitMQ's delay queue takes a fresh copy carrying the
   * same attempt count), the outage's `retry` is settled like any other. Default is false.
   */
  readonly redeliverSpendsCount?: boolean;
}
