// What a transaction puts in the outbox: core's OutgoingMessage plus the name of the publisher that delivers it.

/** One message to publish once the enqueueing transaction commits. */
export interface OutboxMessage {
  /** The key of `startOutboxRelay`'s `publishers` that delivers it (`kafka`, `orders-exchange` …). Default is `default`. */
  readonly publisher?: string;
  /** Kafka topic, RabbitMQ exchange (routing key in `routingKey`), or SQS queue URL. */
  readonly destination: string;
  /** Kafka partition key or SQS FIFO MessageGroupId; also the relay's ordering scope (with publisher and destination). */
  readonly key?: string;
  /** RabbitMQ routing key. */
  readonly routingKey?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body: Uint8Array | string;
  /**
   * The message id, kept on every re-publish. Default is a new UUIDv7; pass `deterministicMessageId(...)` when a
   * handler must emit the same id on every attempt. Must be a UUID.
   */
  readonly id?: string;
  /** Ask the broker to hold the message this long, where the transport supports it. */
  readonly delayMs?: number;
}
